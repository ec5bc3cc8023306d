package moirai.flink;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashSet;
import java.util.Set;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.operators.ChainingStrategy;
import org.apache.flink.streaming.api.transformations.PhysicalTransformation;

import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * What the tasks of a job on a standalone cluster ({@code --jobmanager}) count and measure,
 * brought back to {@link Run}: the tasks run in the TaskManagers' JVMs, where {@link Registry}'s
 * statics are out of the client's reach, and neither a FLIP-27 source reader nor a Sink v2 writer
 * has a runtime context to add an accumulator. So, in cluster mode only, each source gets an
 * {@link IngressProbe} chained behind it and each sink a {@link LatencyProbe} chained in front of
 * it: pass-through functions that count and measure as the reader and the writer do and add the
 * results to Flink accumulators when they close; the JobManager merges them into the job's result,
 * and {@link #collect} puts them into the client's {@link Registry}, from which the summary is
 * written as after a MiniCluster run.
 *
 * <p>Chaining: the jobs run with operator chaining off (one task thread per operator) — in cluster
 * mode it is on, and every operator starts a chain of its own ({@link ChainingStrategy#HEAD})
 * except the probes and the sinks ({@link ChainingStrategy#ALWAYS}), so that exactly the pairs
 * source → ingress probe and latency probe → sink share a task thread. The MiniCluster path adds
 * no probe and stays as it was.
 */
final class ClusterResults {
    static final String EMITTED = "moirai.emitted";
    static final String EMITTED_MEASURED = "moirai.emitted-measured";
    static final String RECEIVED = "moirai.received";
    static final String RECEIVED_MEASURED = "moirai.received-measured";
    static final String LATENCY = "moirai.latency";
    static final String E2E_LATENCY = "moirai.e2e-latency";
    /** Linear Road: position reports and other records the dispatchers saw. */
    static final String POSITION_REPORTS = "moirai.lr.position-reports";
    static final String OTHER_RECORDS = "moirai.lr.other-records";
    /** Linear Road: notifications per branch ({@code NOTIFICATIONS + b}), deadline misses, the largest e2e. */
    static final String NOTIFICATIONS = "moirai.lr.notifications-";
    static final String DEADLINE_MISSES = "moirai.lr.deadline-misses";
    static final String MAX_E2E_NS = "moirai.lr.max-e2e-ns";

    /** The run's length and warm-up, for the probes. */
    final long durationNs;
    final double warmup;
    /** Transformations that chain to their input: the probes behind sources, the sinks. */
    private final Set<Integer> chained = new HashSet<>();
    /** Subtasks of the probes (each shares the thread of its source or sink). */
    private int probeSubtasks;

    ClusterResults(long durationNs, double warmup) {
        this.durationNs = durationNs;
        this.warmup = warmup;
    }

    /** In a task: {@link Registry}'s settings, which a TaskManager's copy of it lacks. */
    static void settings(long durationNs, double warmup) {
        Registry.durationNs = durationNs;
        Registry.warmup = warmup;
    }

    /** {@code source} with an {@link IngressProbe} chained behind it. */
    <T extends Stamped> DataStream<T> ingress(DataStream<T> source, String name) {
        DataStream<T> probed = source.map(new IngressProbe<T>(durationNs, warmup), source.getType())
                .name(name)
                .setParallelism(source.getParallelism());
        chained.add(probed.getId());
        probeSubtasks += source.getParallelism();
        return probed;
    }

    /** {@code in} through {@code probe}, which the sink added next ({@link #sink}) chains to. */
    <T extends Stamped> DataStream<T> latency(DataStream<T> in, LatencyProbe<T> probe, String name, int parallelism) {
        DataStream<T> probed = in.flatMap(probe, in.getType()).name(name).setParallelism(parallelism);
        probeSubtasks += parallelism;
        return probed;
    }

    /** A default latency probe. */
    <T extends Stamped> LatencyProbe<T> probe() {
        return new LatencyProbe<>(durationNs, warmup);
    }

    /** Marks the sink behind a latency probe. */
    void sink(DataStreamSink<?> sink) {
        chained.add(sink.getTransformation().getId());
    }

    /** Sets every operator's chaining strategy: probes and sinks chain to their input, nothing else does. */
    void chain(StreamExecutionEnvironment env) {
        Deque<Transformation<?>> todo = new ArrayDeque<>(env.getTransformations());
        Set<Integer> seen = new HashSet<>();
        while (!todo.isEmpty()) {
            Transformation<?> t = todo.pop();
            if (!seen.add(t.getId())) {
                continue;
            }
            if (t instanceof PhysicalTransformation<?> p) {
                p.setChainingStrategy(chained.contains(t.getId()) ? ChainingStrategy.ALWAYS : ChainingStrategy.HEAD);
            }
            todo.addAll(t.getInputs());
        }
    }

    /** Subtasks that share a task thread with a source or a sink. */
    int probeSubtasks() {
        return probeSubtasks;
    }

    /** A merged count of the job's result (0 when no subtask added it). */
    static long count(JobExecutionResult result, String name) {
        Object v = result.getAccumulatorResult(name);
        return v instanceof Long l ? l : 0;
    }

    /**
     * Puts the merged accumulators into this JVM's {@link Registry}: the latency histograms and
     * Linear Road's counts; returns {@code {emitted, emitted measured, received, received measured}}.
     */
    static long[] collect(JobExecutionResult result) {
        Histogram[] h = new Histogram[2];
        String[] names = {LATENCY, E2E_LATENCY};
        for (int i = 0; i < 2; i++) {
            Object v = result.getAccumulatorResult(names[i]);
            h[i] = v instanceof Histogram x ? x : new Histogram(3);
        }
        Registry.merge(h[0], h[1]);
        Registry.POSITION_REPORTS.add(count(result, POSITION_REPORTS));
        Registry.OTHER_RECORDS.add(count(result, OTHER_RECORDS));
        for (int b = 0; b < 3; b++) {
            Registry.LACHESIS_NOTIFICATIONS[b].add(count(result, NOTIFICATIONS + b));
        }
        Registry.DEADLINE_MISSES.add(count(result, DEADLINE_MISSES));
        Registry.MAX_E2E_NS.accumulateAndGet(count(result, MAX_E2E_NS), Math::max);
        return new long[] {
            count(result, EMITTED), count(result, EMITTED_MEASURED), count(result, RECEIVED), count(result, RECEIVED_MEASURED)
        };
    }
}
