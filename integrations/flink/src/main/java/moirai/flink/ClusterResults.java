package moirai.flink;

import java.util.Map;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.configuration.Configuration;

import moirai.jobs.LatencyMeter;
import moirai.jobs.Registry;

/**
 * What the job's tasks measure, brought back to {@link Run} when they run in other JVMs (the
 * TaskManagers of a standalone cluster, {@code --jobmanager}): the run's duration and warm-up go
 * to the tasks as global job parameters, and each source and sink subtask adds its counts and
 * histograms to Flink accumulators when it closes, which the JobManager merges into the job's
 * result. In a MiniCluster the same accumulators are filled and simply not read.
 */
final class ClusterResults {
    private ClusterResults() {}

    static final String EMITTED = "moirai.emitted";
    static final String EMITTED_MEASURED = "moirai.emitted-measured";
    static final String RECEIVED = "moirai.received";
    static final String RECEIVED_MEASURED = "moirai.received-measured";
    static final String LATENCY = "moirai.latency";
    static final String E2E_LATENCY = "moirai.e2e-latency";

    private static final String DURATION_NS = "moirai.duration-ns";
    private static final String WARMUP = "moirai.warmup";

    /** The global job parameters that carry {@link Registry}'s settings to the tasks. */
    static Configuration jobParameters(long durationNs, double warmup) {
        Configuration p = new Configuration();
        p.setString(DURATION_NS, Long.toString(durationNs));
        p.setString(WARMUP, Double.toString(warmup));
        return p;
    }

    /** When a task opens: {@link Registry}'s settings from the job parameters (another JVM's tasks lack them). */
    static void open(RuntimeContext ctx) {
        Map<String, String> p = ctx.getGlobalJobParameters();
        String duration = p.get(DURATION_NS);
        if (duration != null) {
            Registry.durationNs = Long.parseLong(duration);
            Registry.warmup = Double.parseDouble(p.get(WARMUP));
        }
    }

    /** When a source subtask closes: what it emitted. */
    static void sourceClosed(RuntimeContext ctx, Registry.SourceMeter meter) {
        ctx.addAccumulator(EMITTED, new LongCounter(meter.emitted()));
        ctx.addAccumulator(EMITTED_MEASURED, new LongCounter(meter.measured()));
    }

    /** When a sink subtask closes: what it received and its latency histograms. */
    static void sinkClosed(RuntimeContext ctx, LatencyMeter meter) {
        ctx.addAccumulator(RECEIVED, new LongCounter(meter.received()));
        ctx.addAccumulator(RECEIVED_MEASURED, new LongCounter(meter.measured()));
        Histogram[] h = meter.histograms();
        HistogramAccumulator latency = new HistogramAccumulator();
        latency.add(h[0]);
        HistogramAccumulator e2e = new HistogramAccumulator();
        e2e.add(h[1]);
        ctx.addAccumulator(LATENCY, latency);
        ctx.addAccumulator(E2E_LATENCY, e2e);
    }

    /** A merged count of the job's result (0 when no subtask added it). */
    static long count(JobExecutionResult result, String name) {
        Object v = result.getAccumulatorResult(name);
        return v instanceof Long l ? l : 0;
    }

    /** A merged histogram of the job's result (empty when no sink added it). */
    static Histogram histogram(JobExecutionResult result, String name) {
        Object v = result.getAccumulatorResult(name);
        return v instanceof Histogram h ? h : new Histogram(3);
    }
}
