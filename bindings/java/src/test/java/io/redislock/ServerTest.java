package io.redislock;

import io.redislock.Servers.Server;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInfo;

/** A test class on the suite's server, with a client opened before its tests and closed after them. */
abstract class ServerTest {
  static Server server;
  static RedisLockClient client;

  @BeforeAll
  static void start() throws IOException {
    server = Servers.main();
    client = RedisLockClient.open(server.url());
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  /** A lock name no other test uses: the test method's. */
  static String key(TestInfo t) {
    return "java:" + t.getTestMethod().get().getName();
  }
}
