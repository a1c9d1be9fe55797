import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
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
import org.opensearch.cluster.metadata.IndexMetadata;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.common.xcontent.XContentHelper;
import org.opensearch.common.xcontent.json.JsonXContent;
import org.opensearch.core.action.ActionListener;
import org.opensearch.core.action.ActionResponse;
import org.opensearch.core.index.Index;
import org.opensearch.env.Environment;
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
     * A field that only an index template brings is not checked (the template is merged after the filter).
     */
    public static final class NativeEngineGuard extends Plugin implements ActionPlugin {
        private static final Set<String> NATIVE = Set.of("faiss", "nmslib");

        @Override
        public Collection<RequestValidators.RequestValidator<PutMappingRequest>> mappingRequestValidators() {
            return List.of((request, state, indices) -> {
                for (Index index : indices) {
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
                    if (request instanceof CreateIndexRequest) {
                        CreateIndexRequest create = (CreateIndexRequest) request;
                        Optional<String> refusal = create.settings().getAsBoolean("index.knn", false)
                            ? refusal(create.mappings()) : Optional.empty();
                        if (refusal.isPresent()) {
                            listener.onFailure(new IllegalArgumentException(refusal.get()));
                            return;
                        }
                    }
                    chain.proceed(task, action, request, listener);
                }
            });
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
