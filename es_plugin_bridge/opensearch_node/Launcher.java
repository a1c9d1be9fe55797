import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.opensearch.action.ActionRequest;
import org.opensearch.action.RequestValidators;
import org.opensearch.action.admin.indices.create.CreateIndexRequest;
import org.opensearch.action.admin.indices.mapping.put.PutMappingRequest;
import org.opensearch.action.support.ActionFilter;
import org.opensearch.action.support.ActionFilterChain;
import org.opensearch.cluster.ClusterState;
import org.opensearch.cluster.metadata.IndexMetadata;
import org.opensearch.cluster.metadata.IndexTemplateMetadata;
import org.opensearch.cluster.metadata.MappingMetadata;
import org.opensearch.cluster.metadata.MetadataIndexTemplateService;
import org.opensearch.cluster.service.ClusterService;
import org.opensearch.common.compress.CompressedXContent;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.common.xcontent.XContentHelper;
import org.opensearch.common.xcontent.json.JsonXContent;
import org.opensearch.core.action.ActionListener;
import org.opensearch.core.action.ActionResponse;
import org.opensearch.core.index.Index;
import org.opensearch.env.Environment;
import org.opensearch.gateway.GatewayService;
import org.opensearch.index.IndexModule;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.shard.IndexEventListener;
import org.opensearch.index.shard.IndexShard;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.ActionPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.tasks.Task;

/**
 * Starts one OpenSearch node from a home laid out by es_plugin_bridge.opensearch_node.layout.
 *
 * Why not org.opensearch.bootstrap.OpenSearch: Bootstrap installs a security manager whose policy
 * grants each module's permissions from the plugin-security.policy files a distribution ships and
 * Maven Central does not; a node for tests and local trials needs none of that. This is what
 * Bootstrap does otherwise: settings from CONF_DIR/opensearch.yml, log4j2 from CONF_DIR, the node
 * started and kept alive until the process is told to stop (SIGTERM closes it cleanly).
 *
 * Usage: java -cp 'HOME/lib/*:CLASSES' Launcher HOME CONF_DIR
 */
public final class Launcher {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher HOME CONF_DIR");
            System.exit(64);
        }
        Path home = Paths.get(args[0]).toAbsolutePath();
        Path conf = Paths.get(args[1]).toAbsolutePath();
        // As OpenSearch's own OpenSearchUncaughtExceptionHandler: an Error escaping a thread (the k-NN
        // zip's missing JNI library is one) stops the node instead of leaving a request unanswered.
        Thread.setDefaultUncaughtExceptionHandler((thread, error) -> {
            error.printStackTrace();
            if (error instanceof Error) {
                System.err.println("esrerank-node: fatal error in thread [" + thread.getName() + "], exiting");
                Runtime.getRuntime().halt(1);
            }
        });
        LogConfigurator.registerErrorListener();
        Settings input = Settings.builder().put("path.home", home.toString()).build();
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            input, Collections.emptyMap(), conf, () -> "esrerank-node");
        LogConfigurator.setNodeName(Node.NODE_NAME_SETTING.get(env.settings()));
        LogConfigurator.configure(env);
        // The protected constructor takes plugins from the classpath (as OpenSearch's own MockNode does).
        Node node = new Node(env, List.of(NativeEngineGuard.class), true) { };
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "esrerank-node-shutdown"));
        node.start();
        NativeEngineGuard.deleteRefused(node);
        System.out.println("esrerank-node: started");
        stopped.await();
    }

    /**
     * Refuses, with a 400 naming the field, a k-NN mapping that would use the faiss or nmslib engine on
     * a k-NN index (index.knn: true). The k-NN zip on Maven Central carries no native library, so the
     * first flush of such a vector throws UnsatisfiedLinkError in a write thread, which stops the node.
     * A knn_vector without method.engine resolves to faiss on 2.19 (k-NN's EngineResolver: DEFAULT is
     * FAISS unless compression_level is 4x, which only lucene supports); OpenSearch's semantic-search
     * tutorial maps its vector that way. Checked where a mapping arrives with its index's settings
     * known: index creation (an action filter) and PUT _mapping (a mapping request validator).
     * The settings and mappings are read as OpenSearch resolves them: "knn" without the index. prefix, and
     * what a matching _index_template (with its component templates) or legacy _template brings.
     */
    public static final class NativeEngineGuard extends Plugin implements ActionPlugin {
        private static final Set<String> NATIVE = Set.of("faiss", "nmslib");
        /** How the console names an index deleted at start (node.py's deleted_at_start reads it). */
        static final String DELETED = "esrerank-node: deleted index ";
        /**
         * -Desrerank.guard.new_indices=false lets a new index or mapping through unchecked, as a node before
         * this guard did: only for tests that need such an index on disk (what this node removes at start).
         */
        private static final boolean CHECK_NEW = !"false".equals(System.getProperty("esrerank.guard.new_indices"));

        @Override
        public Collection<RequestValidators.RequestValidator<PutMappingRequest>> mappingRequestValidators() {
            return List.of((request, state, indices) -> {
                for (Index index : CHECK_NEW ? indices : new Index[0]) {
                    IndexMetadata meta = state.metadata().index(index);
                    if (meta != null && meta.getSettings().getAsBoolean("index.knn", false)) {
                        Optional<String> refusal = refusal(request.source());
                        if (refusal.isPresent()) {
                            return Optional.of(new IllegalArgumentException(refusal.get()));
                        }
                    }
                }
                return Optional.empty();
            });
        }

        @Override
        public List<ActionFilter> getActionFilters() {
            return List.of(new ActionFilter() {
                @Override
                public int order() {
                    return 0;
                }

                @Override
                public <Q extends ActionRequest, R extends ActionResponse> void apply(
                        Task task, String action, Q request, ActionListener<R> listener, ActionFilterChain<Q, R> chain) {
                    if (request instanceof CreateIndexRequest && CHECK_NEW) {
                        Optional<String> refusal = refusal((CreateIndexRequest) request);
                        if (refusal.isPresent()) {
                            listener.onFailure(new IllegalArgumentException(refusal.get()));
                            return;
                        }
                    }
                    chain.proceed(task, action, request, listener);
                }
            });
        }

        private static volatile ClusterService clusterService;

        @Override
        public Collection<Object> createComponents(org.opensearch.client.Client client, ClusterService cluster,
                org.opensearch.threadpool.ThreadPool threadPool,
                org.opensearch.watcher.ResourceWatcherService watcher, org.opensearch.script.ScriptService scripts,
                org.opensearch.core.xcontent.NamedXContentRegistry registry, Environment environment,
                org.opensearch.env.NodeEnvironment nodeEnvironment,
                org.opensearch.core.common.io.stream.NamedWriteableRegistry writeables,
                org.opensearch.cluster.metadata.IndexNameExpressionResolver resolver,
                java.util.function.Supplier<org.opensearch.repositories.RepositoriesService> repositories) {
            clusterService = cluster;
            return Collections.emptyList();
        }

        /**
         * index.knn as OpenSearch resolves it: "knn" without the index. prefix is the same setting
         * (MetadataCreateIndexService normalises the request's settings with Settings.Builder.normalizePrefix).
         */
        static boolean knn(Settings settings) {
            return Settings.builder().put(settings).normalizePrefix("index.").build().getAsBoolean("index.knn", false);
        }

        /**
         * A new index's settings and mappings as MetadataCreateIndexService merges them: the matching
         * composable template (_index_template, with its component templates) or else the legacy
         * _template ones, under the request's own (which win).
         */
        static Optional<String> refusal(CreateIndexRequest create) {
            List<String> mappings = new ArrayList<>();
            Settings.Builder settings = Settings.builder();
            ClusterService cluster = clusterService;
            if (cluster != null) {
                ClusterState state = cluster.state();
                String name = create.index();
                try {
                    String v2 = MetadataIndexTemplateService.findV2Template(state.metadata(), name, false);
                    if (v2 != null) {
                        settings.put(MetadataIndexTemplateService.resolveSettings(state.metadata(), v2));
                        for (CompressedXContent mapping : MetadataIndexTemplateService.collectMappings(state, v2, name)) {
                            mappings.add(mapping.string());
                        }
                    } else {
                        List<IndexTemplateMetadata> v1 = MetadataIndexTemplateService.findV1Templates(
                            state.metadata(), name, null);
                        settings.put(MetadataIndexTemplateService.resolveSettings(v1));
                        for (IndexTemplateMetadata template : v1) {
                            if (template.mappings() != null) {
                                mappings.add(template.mappings().string());
                            }
                        }
                    }
                } catch (Exception e) {
                    // a template that does not resolve fails the creation itself, with its own reason
                }
            }
            settings.put(Settings.builder().put(create.settings()).normalizePrefix("index.").build());
            mappings.add(create.mappings());
            if (!knn(settings.build())) {
                return Optional.empty();
            }
            for (String mapping : mappings) {
                Optional<String> found = refusal(mapping);
                if (found.isPresent()) {
                    return found;
                }
            }
            return Optional.empty();
        }

        /** Why an index already in the cluster is one of the refused kind (k-NN with a native engine). */
        static Optional<String> refusal(IndexMetadata meta) {
            MappingMetadata mapping = meta.mapping();
            if (mapping == null || !knn(meta.getSettings())) {
                return Optional.empty();
            }
            return refusal(mapping.source().string());
        }

        /**
         * A faiss index already on disk (made before this guard, or by an older esrerank) kills the node
         * again at each start: recovering its translog flushes, and the flush builds the native index. Its
         * shards are refused before recovery (beforeIndexShardRecovery runs before the translog is read:
         * StoreRecovery.internalRecoverFromStore calls IndexShard.preRecovery first), and
         * {@link #deleteRefused} deletes the index once the node is up.
         */
        @Override
        public void onIndexModule(IndexModule module) {
            module.addIndexEventListener(new IndexEventListener() {
                @Override
                public void beforeIndexShardRecovery(IndexShard shard, IndexSettings settings) {
                    Optional<String> refusal = refusal(settings.getIndexMetadata());
                    if (refusal.isPresent()) {
                        throw new IllegalStateException("esrerank-node: index [" + settings.getIndex().getName()
                            + "] not opened: " + refusal.get());
                    }
                }
            });
        }

        /** Delete every index of the refused kind, each named on one line of the node's console. */
        static void deleteRefused(Node node) throws InterruptedException {
            ClusterService cluster = node.injector().getInstance(ClusterService.class);
            long deadline = System.nanoTime() + 60_000_000_000L;
            // The indices on disk are in the cluster state once a cluster manager is elected and the gateway
            // has lifted its block (GatewayService.STATE_NOT_RECOVERED_BLOCK); the node's first local state
            // has neither.
            while (!recovered(cluster.state()) && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            for (IndexMetadata meta : cluster.state().metadata()) {
                Optional<String> refusal = refusal(meta);
                if (refusal.isPresent()) {
                    String name = meta.getIndex().getName();
                    node.client().admin().indices().prepareDelete(name).get();
                    org.apache.logging.log4j.LogManager.getLogger("esrerank-node").warn(
                        DELETED + "[" + name + "] at start: " + refusal.get());
                }
            }
        }

        private static boolean recovered(ClusterState state) {
            return state.nodes().getClusterManagerNodeId() != null
                && !state.blocks().hasGlobalBlock(GatewayService.STATE_NOT_RECOVERED_BLOCK);
        }

        static Optional<String> refusal(String mapping) {
            if (mapping == null || mapping.isEmpty()) {
                return Optional.empty();
            }
            return walk(XContentHelper.convertToMap(JsonXContent.jsonXContent, mapping, false));
        }

        @SuppressWarnings("unchecked")
        private static Optional<String> walk(Map<String, Object> node) {
            Object properties = node.get("properties");
            if (properties instanceof Map) {
                for (Map.Entry<String, Object> entry : ((Map<String, Object>) properties).entrySet()) {
                    if (!(entry.getValue() instanceof Map)) {
                        continue;
                    }
                    Map<String, Object> field = (Map<String, Object>) entry.getValue();
                    String engine = nativeEngine(field);
                    if (engine != null) {
                        return Optional.of("knn_vector field [" + entry.getKey() + "] would use the " + engine
                            + " engine" + (field.containsKey("method") ? "" : " (k-NN 2.19's default when a field names"
                            + " no method.engine)") + ", whose native library this node (k-NN from Maven Central) lacks:"
                            + " the first write would stop the node. Map it with \"method\": {\"name\": \"hnsw\","
                            + " \"engine\": \"lucene\", \"space_type\": \"cosinesimil\"} (or on an index without"
                            + " index.knn, for exact search only)");
                    }
                }
            }
            for (Object value : node.values()) {
                if (value instanceof Map) {
                    Optional<String> inner = walk((Map<String, Object>) value);
                    if (inner.isPresent()) {
                        return inner;
                    }
                }
            }
            return Optional.empty();
        }

        @SuppressWarnings("unchecked")
        private static String nativeEngine(Map<String, Object> field) {
            if (!"knn_vector".equals(field.get("type")) || field.containsKey("model_id")) {
                return null;
            }
            Object method = field.get("method");
            Object engine = method instanceof Map ? ((Map<String, Object>) method).get("engine") : null;
            if (engine != null) {
                return NATIVE.contains(String.valueOf(engine)) ? String.valueOf(engine) : null;
            }
            return "4x".equals(field.get("compression_level")) ? null : "faiss";
        }
    }
}
