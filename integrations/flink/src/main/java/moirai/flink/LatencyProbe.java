package moirai.flink;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.util.Collector;

import moirai.jobs.LatencyMeter;
import moirai.jobs.Stamped;

/**
 * A pass-through chained directly in front of a sink (cluster mode only, see
 * {@link ClusterResults}): it hands each tuple to the sink and then measures it with a
 * {@link LatencyMeter} — the sink's own rule, and the same instant, because a chained
 * {@code collect} returns only after the sink's writer took the tuple (and burnt its cost) — and
 * adds what it counted and measured to the job's accumulators when it closes. The Sink v2 writer
 * itself has no runtime context to add accumulators. Workloads add their own counts through
 * {@link #accept} and {@link #report}.
 *
 * @param <T> the tuples
 */
class LatencyProbe<T extends Stamped> extends RichFlatMapFunction<T, T> {
    private static final long serialVersionUID = 1L;

    private final long durationNs;
    private final double warmup;
    private transient LatencyMeter meter;

    LatencyProbe(long durationNs, double warmup) {
        this.durationNs = durationNs;
        this.warmup = warmup;
    }

    @Override
    public void open(OpenContext context) throws Exception {
        super.open(context);
        ClusterResults.settings(durationNs, warmup);
        meter = new LatencyMeter();
    }

    @Override
    public void flatMap(T t, Collector<T> out) {
        out.collect(t);
        accept(t, meter.record(t));
    }

    /** What a workload counts of each tuple besides its latency (nothing by default). */
    void accept(T t, long e2eNs) {}

    /** Adds a workload's own counts to the job's accumulators (nothing by default). */
    void report() {}

    @Override
    public void close() throws Exception {
        if (meter != null) {
            getRuntimeContext().addAccumulator(ClusterResults.RECEIVED, new LongCounter(meter.received()));
            getRuntimeContext().addAccumulator(ClusterResults.RECEIVED_MEASURED, new LongCounter(meter.measured()));
            Histogram[] h = meter.histograms();
            HistogramAccumulator latency = new HistogramAccumulator();
            latency.add(h[0]);
            HistogramAccumulator e2e = new HistogramAccumulator();
            e2e.add(h[1]);
            getRuntimeContext().addAccumulator(ClusterResults.LATENCY, latency);
            getRuntimeContext().addAccumulator(ClusterResults.E2E_LATENCY, e2e);
            report();
        }
        super.close();
    }
}
