// UppercaseFunction is the Pulsar Function of scripts/bench-functions: each
// message's payload with its ASCII letters uppercased, published to the
// function's output topic, the same work as the uppercase example plugin
// (bytes.ToUpper on ASCII). Bytes in and out (Schema.BYTES), so the instance
// spends nothing on decoding text: the cheapest Function of this work.
package streamrun.bench;

import org.apache.pulsar.functions.api.Context;
import org.apache.pulsar.functions.api.Function;

public class UppercaseFunction implements Function<byte[], byte[]> {
    @Override
    public byte[] process(byte[] input, Context context) {
        byte[] out = new byte[input.length];
        for (int i = 0; i < input.length; i++) {
            byte b = input[i];
            out[i] = (b >= 'a' && b <= 'z') ? (byte) (b - ('a' - 'A')) : b;
        }
        return out;
    }
}
