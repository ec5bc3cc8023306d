package moirai.flink;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * A Sink v2 whose writer takes nothing from its context: the entry point Flink 1.20 calls,
 * {@code createWriter(Sink.InitContext)} (2.x has {@code createWriter(WriterInitContext)} only;
 * the other source root, {@code src/flink2/java}, has that one).
 *
 * @param <T> the records it takes
 */
abstract class SinkEntry<T> implements Sink<T> {
    private static final long serialVersionUID = 1L;

    /** The writer of one subtask. */
    abstract SinkWriter<T> writer();

    @Override
    public SinkWriter<T> createWriter(Sink.InitContext context) {
        return writer();
    }
}
