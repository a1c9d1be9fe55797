import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.concurrent.CountDownLatch;

import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;

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
        Node node = new Node(env);
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
}
