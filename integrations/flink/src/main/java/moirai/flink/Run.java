package moirai.flink;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import moirai.jobs.Json;
import moirai.jobs.Offered;
import moirai.jobs.Options;
import moirai.jobs.Registry;
import moirai.jobs.Spin;
import moirai.jobs.Summary;
import moirai.jobs.SynDraw;

/**
 * Runs one of moirai's workloads as a real Apache Flink job in a local environment (a MiniCluster
 * in this JVM, REST API and web UI on 127.0.0.1), at an offered rate, for a duration, and prints a
 * summary with the field names of {@code moirai run <workload> --json}. See README.md.
 *
 * <p>Exit codes: 0 after a run, 2 for a bad command line, 1 when the job could not start or
 * failed. Stdout carries only the summary; Flink's logs go to stderr.
 */
public final class Run {
    private Run() {}

    /** Entry point: {@code Run <workload> [flags]}. */
    public static void main(String[] args) {
        PrintStream stdout = System.out;
        // Nothing but the summary may reach stdout: anything a library prints goes to stderr.
        System.setOut(System.err);
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.slf4j.simpleLogger.logFile", "System.err");
        setDefault("org.slf4j.simpleLogger.showDateTime", "true");
        setDefault("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        // Harmless warnings of every local run: no log file for the web UI, no delegation tokens.
        setDefault("org.slf4j.simpleLogger.log.org.apache.flink.runtime.webmonitor.WebMonitorUtils", "error");
        setDefault("org.slf4j.simpleLogger.log.org.apache.flink.runtime.security.token", "error");
        Options options;
        try {
            options = Options.parse(args, Options.Engine.FLINK);
        } catch (Options.UsageError e) {
            System.err.println("moirai-flink: " + e.getMessage());
            System.err.println();
            System.err.print(Options.usage(Options.Engine.FLINK));
            System.exit(2);
            return;
        }
        if (options.help) {
            stdout.print(Options.usage(Options.Engine.FLINK));
            stdout.flush();
            System.exit(0);
        }
        int code;
        try {
            code = run(options, stdout);
        } catch (StartError e) {
            System.err.println("moirai-flink: " + e.getMessage());
            code = 1;
        } catch (Throwable t) {
            System.err.println("moirai-flink: the Flink job failed: " + describe(t));
            code = 1;
        }
        stdout.flush();
        System.err.flush();
        // Flink's non-daemon threads must not keep the JVM alive.
        System.exit(code);
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    /** The job could not start; the message says why and what to do. */
    static final class StartError extends Exception {
        private static final long serialVersionUID = 1L;

        StartError(String message) {
            super(message);
        }
    }

    /** The innermost causes of a failure, most specific last. */
    static String describe(Throwable t) {
        StringBuilder s = new StringBuilder();
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        s.append(root.getClass().getName()).append(": ").append(root.getMessage());
        if (root != t) {
            s.append(" (in ").append(t.getClass().getSimpleName()).append(": ").append(t.getMessage()).append(')');
        }
        String text = s.toString().replace('\n', ' ');
        if (text.contains("InaccessibleObjectException") || text.contains("module java.base does not \"opens")) {
            text += "; Kryo needs reflective access on JDK 17: start the JVM with --add-opens java.base/java.lang=ALL-UNNAMED "
                    + "--add-opens java.base/java.util=ALL-UNNAMED (this is a bug: these jobs should not use Kryo)";
        }
        return text;
    }

    private static void checkPortFree(int port, String what, String flag) throws StartError {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
        } catch (IOException e) {
            throw new StartError("the " + what + " port 127.0.0.1:" + port + " is taken (" + e.getMessage()
                    + "), maybe by another Flink job; pick a free one with " + flag + " N");
        }
    }

    /** Flink's configuration for the local environment. */
    static Configuration flinkConfiguration(Options o, String jobName) {
        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.ADDRESS, "127.0.0.1");
        conf.set(RestOptions.PORT, o.restPort);
        // The JobManager fetches metrics for REST at most this often (default 10 s).
        conf.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
        conf.set(PipelineOptions.NAME, jobName);
        conf.set(PipelineOptions.OPERATOR_CHAINING, false);
        // The sources are bounded (they end after --duration); the job streams all the same.
        conf.set(ExecutionOptions.RUNTIME_MODE, RuntimeExecutionMode.STREAMING);
        // Every tuple type is a POJO: fail rather than fall back to Kryo.
        conf.set(PipelineOptions.GENERIC_TYPES, false);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        // Enough network buffers for a few hundred tasks (64 MiB is the local default).
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse("128m"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse("128m"));
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("32m"));
        if (o.metricsPort != 0) {
            prometheusReporter(conf, o.metricsPort);
        }
        return conf;
    }

    /**
     * The metrics the middleware reads per subtask (its Flink driver's counters and gauges), each in
     * the scope Flink registers it in, as {@code metrics.reporter.<name>.filter.includes} writes a
     * filter: {@code <logical scope>:<name>[,<name>]}.
     */
    static final String[] REPORTED = {
        "taskmanager.job.task:numRecordsIn,numRecordsOut,numBuffersOut,accumulateBusyTimeMs,"
                + "accumulateBackPressuredTimeMs,accumulateIdleTimeMs",
        "taskmanager.job.task.Shuffle.Netty.Input.Buffers:inputQueueLength",
        "taskmanager.job.task.operator:pendingRecords",
    };

    /**
     * Flink's Prometheus reporter on {@code port} (all interfaces: the reporter has no bind address),
     * restricted to {@link #REPORTED}, so that one scrape carries every subtask's counters (the REST
     * API needs a request per job vertex). Label values keep their characters (task names as Flink
     * writes them); the middleware maps samples by job and vertex id all the same.
     */
    static void prometheusReporter(Configuration conf, int port) {
        String p = "metrics.reporter.moirai.";
        setText(conf, p + "factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory");
        setText(conf, p + "port", Integer.toString(port));
        setText(conf, p + "filter.includes", String.join(";", REPORTED));
        setText(conf, p + "filterLabelValueCharacters", "false");
        // Labels the middleware does not read, and the longest ones (an attempt id is 80 characters):
        // every sample carries its labels, so they are most of a scrape's text and of the
        // reporter's work. Kept: job_id, job_name, task_id, task_name, subtask_index,
        // task_attempt_num, tm_id.
        setText(conf, p + "scope.variables.excludes", String.join(";", EXCLUDED_LABELS));
    }

    /** The scope variables the reporter leaves out of its labels. */
    static final String[] EXCLUDED_LABELS = {"task_attempt_id", "host", "operator_id"};

    /** Sets a key by name (Flink 2 has no {@code setString}). */
    private static void setText(Configuration conf, String key, String value) {
        conf.set(ConfigOptions.key(key).stringType().noDefaultValue(), value);
    }

    static int run(Options o, PrintStream stdout) throws Exception {
        boolean remote = o.jobmanager != null;
        if (!remote) {
            checkPortFree(o.restPort, "REST", "--rest-port");
            if (o.metricsPort != 0) {
                checkPortFree(o.metricsPort, "metrics", "--metrics-port");
            }
        }
        Registry.durationNs = o.durationNs;
        Registry.warmup = o.warmup;
        String jobName = "moirai-" + o.workload;
        boolean syn = o.workload.equals("syn");
        List<SynDraw.QueryParams> synParams = syn ? SynDraw.draw(o.syn) : List.of();
        boolean spins = synParams.stream().anyMatch(
                q -> q.sinkCostNs > 0 || q.operators.stream().anyMatch(op -> op.costNs > 0));
        double spinRate = spins ? Spin.iterationsPerNs() : 0;

        StreamExecutionEnvironment env = remote
                ? StandaloneCluster.environment(o.jobmanager, flinkConfiguration(o, jobName))
                : StreamExecutionEnvironment.createLocalEnvironmentWithWebUI(flinkConfiguration(o, jobName));
        env.setParallelism(o.parallelism);
        // On a cluster the probes chain to their sources and sinks, nothing else chains (ClusterResults).
        ClusterResults results = remote ? new ClusterResults(o.durationNs, o.warmup) : null;
        if (!remote) {
            env.disableOperatorChaining();
        }
        env.setBufferTimeout(o.bufferTimeoutMs);

        double durationS = o.durationNs / 1e9;
        Offered offered = o.rate == 0
                ? Offered.unlimited()
                : o.rampTo != null ? Offered.ramp(o.rate, o.rampTo, durationS) : Offered.constant(o.rate);
        if (syn) {
            Syn.build(env, o.syn, synParams, offered, o.durationNs, o.parallelism, results);
        } else {
            LinearRoad.build(env, o.traffic, offered, o.durationNs, o.parallelism, results);
        }
        if (remote) {
            results.chain(env);
        }

        long jvmStartMs = ManagementFactory.getRuntimeMXBean().getStartTime();
        int subtasks = remote ? StandaloneCluster.subtasks(env) - results.probeSubtasks() : 0;
        JobClient client = env.executeAsync(jobName);
        System.err.printf("moirai-flink: job %s (%s) submitted; REST API and web UI on http://%s%s%n",
                client.getJobID(), jobName, remote ? o.jobmanager : "127.0.0.1:" + o.restPort,
                o.metricsPort == 0 ? "" : "; metrics on http://127.0.0.1:" + o.metricsPort + "/metrics");
        CompletableFuture<JobExecutionResult> result = client.getJobExecutionResult();

        // Watch the run: CPU at the edges of the measured window, a timeline point every second.
        List<Object> timeline = new ArrayList<>();
        long cpu0 = -1;
        long cpu1 = -1;
        long t0 = 0;
        long t1 = 0;
        int nextSecond = 1;
        long lastIn = 0;
        long lastOut = 0;
        long lastT = 0;
        double startupS = -1;
        int fullSeconds = (int) Math.floor(durationS + 1e-9);
        while (!result.isDone()) {
            long wait = 100_000_000L;
            long start = Registry.startNs();
            if (start != 0) {
                long now = System.nanoTime();
                for (long target : new long[] {
                    cpu0 < 0 ? Registry.windowStartNs() : Long.MAX_VALUE,
                    cpu1 < 0 ? Registry.windowEndNs() : Long.MAX_VALUE,
                    nextSecond <= fullSeconds ? start + nextSecond * 1_000_000_000L : Long.MAX_VALUE}) {
                    if (target != Long.MAX_VALUE) {
                        wait = Math.min(wait, Math.max(0, target - now));
                    }
                }
            }
            try {
                result.get(Math.max(wait, 200_000L), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                // Time for the next look.
            } catch (ExecutionException e) {
                break;
            }
            start = Registry.startNs();
            if (start == 0) {
                continue;
            }
            if (startupS < 0) {
                long startMs = Registry.startEpochMs;
                startupS = ((startMs == 0 ? System.currentTimeMillis() : startMs) - jvmStartMs) / 1e3;
                System.err.printf("moirai-flink: job running, sources started %.1f s after the JVM%n", startupS);
            }
            long now = System.nanoTime();
            if (cpu0 < 0 && now - Registry.windowStartNs() >= 0) {
                cpu0 = Summary.processCpuNs();
                t0 = now;
            }
            if (cpu1 < 0 && now - Registry.windowEndNs() >= 0) {
                cpu1 = Summary.processCpuNs();
                t1 = now;
            }
            while (nextSecond <= fullSeconds && now - (start + nextSecond * 1_000_000_000L) >= 0) {
                long in = Registry.emitted();
                long out = Registry.received();
                long t = now - start;
                double dt = Math.max(t - lastT, 1) / 1e9;
                timeline.add(Summary.point(t / 1e9, (in - lastIn) / dt, (out - lastOut) / dt, Registry.backlog()));
                lastIn = in;
                lastOut = out;
                lastT = t;
                nextSecond++;
            }
        }
        JobExecutionResult done = result.get();
        long now = System.nanoTime();
        if (cpu0 < 0) {
            cpu0 = Summary.processCpuNs();
            t0 = now;
        }
        if (cpu1 < 0) {
            cpu1 = Summary.processCpuNs();
            t1 = now;
        }

        double measuredS = o.durationNs * (1 - o.warmup) / 1e9;
        // On a cluster the probes' accumulators, put into this JVM's Registry; here, the tasks' own.
        long[] counts = remote
                ? ClusterResults.collect(done)
                : new long[] {Registry.emitted(), Registry.emittedMeasured(), Registry.received(), Registry.receivedMeasured()};
        Histogram[] latencies = Registry.latencies();
        Map<String, Object> s = Json.object();
        s.put("workload", o.workload);
        s.put("system", "flink");
        s.put("flink_version", EnvironmentInformation.getVersion());
        s.put("job_name", jobName);
        s.put("job_id", client.getJobID().toString());
        s.put("offered_rate", o.rate);
        if (o.rampTo != null) {
            s.put("ramp_to", o.rampTo);
        }
        s.put("duration_s", durationS);
        s.put("measured_s", measuredS);
        s.put("ingress_tps", counts[1] / measuredS);
        s.put("egress_tps", counts[3] / measuredS);
        s.put("tuples_in", counts[0]);
        s.put("tuples_out", counts[2]);
        s.put("latency_ms", Summary.latency(latencies[0]));
        s.put("e2e_latency_ms", Summary.latency(latencies[1]));
        s.put("threads", remote ? subtasks : Registry.SUBTASKS.get());
        // A cluster's CPU is its TaskManagers', which this client cannot see: 0.
        s.put("cpu_cores", remote ? 0.0 : Math.max(0, cpu1 - cpu0) / 1e9 / Math.max((t1 - t0) / 1e9, 1e-9));
        s.put("startup_s", startupS);
        s.put("net_runtime_s", done.getNetRuntime(TimeUnit.MILLISECONDS) / 1e3);
        s.put("timeline", timeline);
        s.put("warmup", o.warmup);
        s.put("parallelism", o.parallelism);
        if (remote) {
            s.put("jobmanager", o.jobmanager);
        } else {
            s.put("rest_port", o.restPort);
            s.put("metrics_port", o.metricsPort == 0 ? null : o.metricsPort);
        }
        s.put("buffer_timeout_ms", o.bufferTimeoutMs);
        s.put("seed", new java.math.BigInteger(Long.toUnsignedString(o.seed)));
        Summary.workloadFields(s, o, spinRate, synParams);
        Summary.print(s, o.json, stdout, "Apache Flink " + s.get("flink_version"), "task threads");
        return 0;
    }
}
