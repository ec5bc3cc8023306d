package moirai.flink;

import org.HdrHistogram.Histogram;
import org.apache.flink.api.common.accumulators.Accumulator;

/**
 * A latency histogram as a Flink accumulator: each latency probe subtask adds its own when it
 * closes, the JobManager merges them, and the client reads the merged histogram from the job's
 * result (on a standalone cluster the probes run in the TaskManagers, not in {@link Run}'s JVM).
 */
final class HistogramAccumulator implements Accumulator<Histogram, Histogram> {
    private static final long serialVersionUID = 1L;

    private Histogram histogram = new Histogram(3);

    @Override
    public void add(Histogram value) {
        histogram.add(value);
    }

    @Override
    public Histogram getLocalValue() {
        return histogram;
    }

    @Override
    public void resetLocal() {
        histogram = new Histogram(3);
    }

    @Override
    public void merge(Accumulator<Histogram, Histogram> other) {
        histogram.add(other.getLocalValue());
    }

    @Override
    public HistogramAccumulator clone() {
        HistogramAccumulator copy = new HistogramAccumulator();
        copy.histogram = histogram.copy();
        return copy;
    }
}
