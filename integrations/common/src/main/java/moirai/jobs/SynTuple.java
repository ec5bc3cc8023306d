package moirai.jobs;

/** A SYN tuple: a counter value (which seeds the cost loop, as in moirai) and its timestamps. */
public class SynTuple extends Stamped {
    /** The n-th tuple of its source instance. */
    public long value;

    /** For Flink's POJO serializer. */
    public SynTuple() {}

    /** A copy of {@code other} (an operator with selectivity above 1 emits copies). */
    public SynTuple copy() {
        SynTuple t = new SynTuple();
        t.value = value;
        t.stampFrom(this);
        return t;
    }
}
