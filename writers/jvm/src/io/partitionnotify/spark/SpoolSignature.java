package io.partitionnotify.spark;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.concurrent.atomic.AtomicBoolean;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Signs a manifest before it is spooled, so {@code serve} can tell it from a file anyone
 * with write access to the table directory dropped there (docs/security.md).
 *
 * <p>Key: the lower-case hex SHA-256 of the writer token ({@code spark.partitionnotify.token}
 * or {@code PN_WRITER_TOKEN}), as ASCII bytes: the digest {@code serve} keeps of every token.
 * Signature: HMAC-SHA256 over the body exactly as serialised, appended as the body's last
 * field {@code "signature":"hmac-sha256:<hex>"}; writers/spool_signature.py verifies it.
 */
final class SpoolSignature {
  private static final Logger LOG = LoggerFactory.getLogger(SpoolSignature.class);
  private static final AtomicBoolean WARNED = new AtomicBoolean();
  static final String PREFIX = "hmac-sha256:";

  private SpoolSignature() {}

  /** {@code body} signed with {@code token}; unchanged (and one WARN) without a token. */
  static String signed(String body, String token) {
    if (token == null || token.isEmpty()) {
      if (WARNED.compareAndSet(false, true)) {
        LOG.warn("partition-notify: no writer token (spark.partitionnotify.token or "
            + "PN_WRITER_TOKEN): spooled manifests are unsigned and serve refuses them; "
            + "apply them with `partition-notify commits apply`");
      }
      return body;
    }
    String trimmed = body.strip();
    if (!trimmed.endsWith("}")) {
      throw new IllegalArgumentException("a manifest body must be a JSON object");
    }
    try {
      byte[] key = hex(MessageDigest.getInstance("SHA-256")
          .digest(token.getBytes(StandardCharsets.UTF_8))).getBytes(StandardCharsets.US_ASCII);
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      String sig = hex(mac.doFinal(trimmed.getBytes(StandardCharsets.UTF_8)));
      return trimmed.substring(0, trimmed.length() - 1)
          + ",\"signature\":\"" + PREFIX + sig + "\"}";
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HMAC-SHA256 is not available", e);
    }
  }

  private static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return out.toString();
  }
}
