package moirai.jobs;

/**
 * What every tuple of these jobs carries besides its data: when it was intended to be sent (its
 * due time on the source's schedule) and when the source actually emitted it, both
 * {@link System#nanoTime()} of this JVM. Operators pass both on to what they emit, so that the
 * sink can measure processing latency (egress − ingress) and end-to-end latency
 * (egress − intended, which includes the wait in the source's backlog).
 *
 * <p>A Flink POJO (public fields, public no-argument constructor): serialized by Flink's
 * PojoSerializer, never by Kryo.
 */
public class Stamped {
    /** Intended send time, ns ({@link System#nanoTime()}). */
    public long intendedNs;
    /** Ingress time: when the source emitted it, ns ({@link System#nanoTime()}). */
    public long ingressNs;

    /** For Flink's POJO serializer. */
    public Stamped() {}

    /** Takes the timestamps of {@code from} (what Rust's {@code Tuple::with} does). */
    public final void stampFrom(Stamped from) {
        this.intendedNs = from.intendedNs;
        this.ingressNs = from.ingressNs;
    }
}
