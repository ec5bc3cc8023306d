package moirai.jobs;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes the summary as one line of JSON: objects keep their insertion order; values are
 * numbers, strings, booleans, null, lists and nested maps. Non-finite numbers are written as
 * null (JSON has no NaN).
 */
public final class Json {
    private Json() {}

    /** An ordered JSON object. */
    public static Map<String, Object> object() {
        return new LinkedHashMap<>();
    }

    /** {@code value} as JSON text. */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder(1024);
        write(value, out);
        return out.toString();
    }

    private static void write(Object v, StringBuilder out) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof String s) {
            string(s, out);
        } else if (v instanceof Boolean b) {
            out.append(b.booleanValue());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (!Double.isFinite(d)) {
                out.append("null");
            } else if (d == Math.rint(d) && Math.abs(d) < 1e15) {
                out.append((long) d).append(".0");
            } else {
                out.append(d);
            }
        } else if (v instanceof java.math.BigInteger b) {
            out.append(b);
        } else if (v instanceof Number n) {
            out.append(n.longValue());
        } else if (v instanceof Map<?, ?> m) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                string(String.valueOf(e.getKey()), out);
                out.append(':');
                write(e.getValue(), out);
            }
            out.append('}');
        } else if (v instanceof List<?> l) {
            out.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                write(l.get(i), out);
            }
            out.append(']');
        } else if (v instanceof long[] a) {
            out.append('[');
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    out.append(',');
                }
                out.append(a[i]);
            }
            out.append(']');
        } else {
            string(v.toString(), out);
        }
    }

    private static void string(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
