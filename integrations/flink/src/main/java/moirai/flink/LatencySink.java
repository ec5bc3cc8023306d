package moirai.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.sink.RichSinkFunction;

import moirai.jobs.LatencyMeter;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * The sink of every query: counts what leaves the job and records, for tuples that leave after the
 * warm-up, processing latency (egress − ingress) and end-to-end latency (egress − intended)
 * ({@link LatencyMeter}), merged into {@link Registry} when it closes.
 *
 * @param <T> the tuples it takes
 */
class LatencySink<T extends Stamped> extends RichSinkFunction<T> {
    private static final long serialVersionUID = 1L;

    private transient LatencyMeter meter;

    @Override
    public void open(OpenContext context) throws Exception {
        super.open(context);
        ClusterResults.open(getRuntimeContext());
        meter = new LatencyMeter();
        Registry.SUBTASKS.incrementAndGet();
    }

    @Override
    public void invoke(T t, Context context) {
        before(t);
        long e2eNs = meter.record(t);
        accept(t, e2eNs);
    }

    /** What a workload does with each tuple before it is measured (nothing by default). */
    void before(T t) {}

    /** What a workload does with each tuple besides measuring it (nothing by default). */
    void accept(T t, long e2eNs) {}

    @Override
    public void close() throws Exception {
        if (meter != null) {
            meter.close();
            ClusterResults.sinkClosed(getRuntimeContext(), meter);
        }
        super.close();
    }
}
