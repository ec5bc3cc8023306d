package moirai.storm;

/**
 * The end of a task's stream, on the stream {@link #STREAM}: a spout sends it once after
 * {@code --duration}, and a bolt forwards it once it has one from every task upstream (tuples
 * between two tasks arrive in order, so the marker comes after all their data). Like the end of
 * a bounded input in Flink: average_speed emits its last vehicle then, and the sinks' markers tell
 * {@link Run} that the topology has drained.
 */
public final class End implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    /** The stream that carries the markers (all grouping). */
    public static final String STREAM = "end";

    /** The task that sent it. */
    public int task;

    /** For Kryo. */
    public End() {}

    End(int task) {
        this.task = task;
    }
}
