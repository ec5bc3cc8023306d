package moirai.flink;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * A Sink v2 whose writer takes nothing from its context: the entry point Flink 2.x calls,
 * {@code createWriter(WriterInitContext)} (1.20 needs {@code createWriter(Sink.InitContext)},
 * which 2.x no longer has; the other source root, {@code src/flink1/java}, has that one).
 *
 * @param <T> the records it takes
 */
abstract class SinkEntry<T> implements Sink<T> {
    private static final long serialVersionUID = 1L;

    /** The writer of one subtask. */
    abstract SinkWriter<T> writer();

    @Override
    public SinkWriter<T> createWriter(WriterInitContext context) {
        return writer();
    }
}
