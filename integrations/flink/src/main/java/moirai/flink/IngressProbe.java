package moirai.flink;

import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;

import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * A pass-through map chained to a source (cluster mode only, see {@link ClusterResults}): counts
 * what the source emitted, over the run and during the measured window (the source reader's own
 * rule: ingress time in {@code [start + warmup·duration, start + duration)}), and adds both counts
 * to the job's accumulators when it closes. Chained, it sees each tuple in the reader's own call
 * to emit it; a FLIP-27 reader has no runtime context to add accumulators itself.
 *
 * @param <T> the tuples
 */
final class IngressProbe<T extends Stamped> extends RichMapFunction<T, T> {
    private static final long serialVersionUID = 1L;

    private final long durationNs;
    private final double warmup;
    private transient long emitted;
    private transient long measured;
    private transient long windowStart;
    private transient long windowEnd;
    private transient boolean started;

    IngressProbe(long durationNs, double warmup) {
        this.durationNs = durationNs;
        this.warmup = warmup;
    }

    @Override
    public void open(OpenContext context) throws Exception {
        super.open(context);
        ClusterResults.settings(durationNs, warmup);
    }

    @Override
    public T map(T t) {
        if (!started) {
            // The reader marked the start before it emitted (the first reader of this JVM wins).
            started = true;
            long start = Registry.markStart(t.ingressNs);
            windowStart = start + (long) (durationNs * warmup);
            windowEnd = start + durationNs;
        }
        emitted++;
        if (t.ingressNs - windowStart >= 0 && t.ingressNs - windowEnd < 0) {
            measured++;
        }
        return t;
    }

    @Override
    public void close() throws Exception {
        getRuntimeContext().addAccumulator(ClusterResults.EMITTED, new LongCounter(emitted));
        getRuntimeContext().addAccumulator(ClusterResults.EMITTED_MEASURED, new LongCounter(measured));
        super.close();
    }
}
