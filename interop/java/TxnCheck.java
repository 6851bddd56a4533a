// TxnCheck drives Apache Pulsar's Java client's transactions against a
// broker with transactions on and checks what a consumer sees. Run it with
// the Java source launcher on the distribution's jars (no build step):
//
//   java -cp "$STREAMRUN_PULSAR_HOME/lib/*" interop/java/TxnCheck.java SERVICE_URL
//
// Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any
// failed. Topics are fresh for every run.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;

public class TxnCheck {
    private static PulsarClient client;
    private static final String RUN = System.currentTimeMillis() + "-" + ProcessHandle.current().pid();
    private static int failures;

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: TxnCheck SERVICE_URL");
            System.exit(2);
        }
        client = PulsarClient.builder().serviceUrl(args[0]).enableTransaction(true)
                .operationTimeout(30, TimeUnit.SECONDS).build();
        try {
            run("a committed transaction's messages arrive after those before, in order", TxnCheck::commitVisible);
            run("an aborted transaction's messages never arrive", TxnCheck::abortInvisible);
            run("a message acknowledged in an aborted transaction comes again", TxnCheck::abortedAckRedelivered);
            run("a second transaction acknowledging a message gets a conflict", TxnCheck::ackConflict);
            run("a transaction past its timeout is aborted by the broker", TxnCheck::timeoutAborts);
        } finally {
            client.close();
        }
        System.exit(failures == 0 ? 0 : 1);
    }

    interface Check {
        void run(String topic) throws Exception;
    }

    private static void run(String what, Check c) {
        String topic = "persistent://public/default/java-txn-" + RUN + "-" + (failures + what.length());
        long start = System.nanoTime();
        try {
            c.run(topic);
            System.out.printf("ok: %s (%.1f s)%n", what, (System.nanoTime() - start) / 1e9);
        } catch (Throwable t) {
            failures++;
            System.out.println("FAIL: " + what + ": " + t);
        }
    }

    private static void check(boolean ok, String msg) {
        if (!ok) {
            throw new AssertionError(msg);
        }
    }

    private static Transaction begin(long seconds) throws Exception {
        return client.newTransaction().withTransactionTimeout(seconds, TimeUnit.SECONDS).build().get();
    }

    private static Producer<byte[]> producer(String topic) throws Exception {
        // The Java client refuses transactional sends with a send timeout.
        return client.newProducer().topic(topic).enableBatching(false).sendTimeout(0, TimeUnit.SECONDS).create();
    }

    private static Consumer<byte[]> consumer(String topic) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName("txn").subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
    }

    private static byte[] body(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    // received takes messages until none comes for quietMillis, acking them.
    private static List<String> received(Consumer<byte[]> c, int quietMillis) throws Exception {
        List<String> out = new ArrayList<>();
        Message<byte[]> m;
        while ((m = c.receive(quietMillis, TimeUnit.MILLISECONDS)) != null) {
            out.add(new String(m.getValue(), StandardCharsets.UTF_8));
            c.acknowledge(m);
        }
        return out;
    }

    private static void commitVisible(String topic) throws Exception {
        try (Consumer<byte[]> c = consumer(topic); Producer<byte[]> p = producer(topic)) {
            p.send(body("before"));
            Transaction txn = begin(60);
            for (int i = 0; i < 3; i++) {
                p.newMessage(txn).value(body("txn-" + i)).send();
            }
            p.send(body("after"));
            List<String> early = received(c, 1000);
            check(early.equals(List.of("before")), "before the commit got " + early);
            txn.commit().get();
            List<String> got = received(c, 2000);
            check(got.equals(List.of("txn-0", "txn-1", "txn-2", "after")), "after the commit got " + got);
        }
    }

    private static void abortInvisible(String topic) throws Exception {
        try (Consumer<byte[]> c = consumer(topic); Producer<byte[]> p = producer(topic)) {
            Transaction txn = begin(60);
            for (int i = 0; i < 3; i++) {
                p.newMessage(txn).value(body("txn-" + i)).send();
            }
            p.send(body("after"));
            txn.abort().get();
            List<String> got = received(c, 2000);
            check(got.equals(List.of("after")), "after the abort got " + got);
        }
    }

    private static void abortedAckRedelivered(String topic) throws Exception {
        try (Consumer<byte[]> c = consumer(topic); Producer<byte[]> p = producer(topic)) {
            p.send(body("m"));
            Message<byte[]> m = c.receive(30, TimeUnit.SECONDS);
            check(m != null, "nothing received");
            Transaction txn = begin(60);
            c.acknowledgeAsync(m.getMessageId(), txn).get();
            txn.abort().get();
            Message<byte[]> again = c.receive(30, TimeUnit.SECONDS);
            check(again != null && again.getMessageId().equals(m.getMessageId()),
                    "after the abort got " + (again == null ? "nothing" : again.getMessageId()));
            check(again.getRedeliveryCount() == 1, "redelivery count " + again.getRedeliveryCount());
            c.acknowledge(again);
        }
    }

    private static void ackConflict(String topic) throws Exception {
        try (Consumer<byte[]> c = consumer(topic); Producer<byte[]> p = producer(topic)) {
            p.send(body("m"));
            Message<byte[]> m = c.receive(30, TimeUnit.SECONDS);
            check(m != null, "nothing received");
            Transaction first = begin(60);
            c.acknowledgeAsync(m.getMessageId(), first).get();
            Transaction second = begin(60);
            try {
                c.acknowledgeAsync(m.getMessageId(), second).get();
                throw new AssertionError("the second transaction's ack succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof PulsarClientException.TransactionConflictException,
                        "the second transaction's ack failed with " + e.getCause());
            }
            second.abort().get();
            first.commit().get();
            check(received(c, 1000).isEmpty(), "the message came again after the first committed");
        }
    }

    private static void timeoutAborts(String topic) throws Exception {
        String out = topic + "-out";
        try (Consumer<byte[]> in = consumer(topic); Consumer<byte[]> outC = consumer(out);
                Producer<byte[]> inP = producer(topic); Producer<byte[]> outP = producer(out)) {
            inP.send(body("m"));
            Message<byte[]> m = in.receive(30, TimeUnit.SECONDS);
            check(m != null, "nothing received");
            Transaction txn = begin(2);
            outP.newMessage(txn).value(body("txn")).send();
            in.acknowledgeAsync(m.getMessageId(), txn).get();
            Message<byte[]> again = in.receive(30, TimeUnit.SECONDS);
            check(again != null && again.getMessageId().equals(m.getMessageId()),
                    "after the timeout got " + (again == null ? "nothing" : again.getMessageId()));
            in.acknowledge(again);
            try {
                txn.commit().get();
                throw new AssertionError("the commit of a timed-out transaction succeeded");
            } catch (ExecutionException e) {
                // Refused, by the client or the broker.
            }
            outP.send(body("after"));
            List<String> got = received(outC, 2000);
            check(got.equals(List.of("after")), "on the output topic got " + got);
        }
    }
}
