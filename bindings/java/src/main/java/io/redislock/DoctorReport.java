package io.redislock;

import com.sun.jna.Pointer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * What {@link RedisLockClient#doctor()} found: one {@link Finding} per check
 * and server, and the text {@code redislock doctor} prints. A copy: nothing
 * native is kept.
 */
public final class DoctorReport {
  /** How much a finding matters. */
  public enum Severity {
    /** Checked, and nothing to change. */
    OK,
    /** Safe as the server runs now, but slow, or unsafe after a rare failure, or not checked. */
    WARNING,
    /** Locks can have two owners in normal operation, fences can go backwards, or locks cannot be used. */
    UNSAFE
  }

  /**
   * One check on one server: {@code check} is a stable name to match on
   * ({@code eviction}, {@code scripting}, {@code time}, ...), {@code server}
   * is {@code host:port} (never credentials), {@code fix} is "" when nothing
   * needs to change.
   */
  public record Finding(Severity severity, String check, String server, String message, String fix) {}

  private final boolean safe;
  private final List<Finding> findings;
  private final String text;

  private DoctorReport(boolean safe, List<Finding> findings, String text) {
    this.safe = safe;
    this.findings = findings;
    this.text = text;
  }

  static DoctorReport of(long report) {
    long n = NativeLib.redislock_report_count(report);
    List<Finding> out = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      Pointer f = NativeLib.redislock_report_finding(report, i);
      int sev = f.getInt(0);
      Severity s = sev >= 0 && sev < Severity.values().length ? Severity.values()[sev] : Severity.UNSAFE;
      out.add(new Finding(s, str(f, 8), str(f, 16), str(f, 24), str(f, 32)));
    }
    return new DoctorReport(NativeLib.redislock_report_is_safe(report) != 0, Collections.unmodifiableList(out),
        NativeLib.redislock_report_text(report));
  }

  private static String str(Pointer f, long offset) {
    Pointer p = f.getPointer(offset);
    return p == null ? "" : p.getString(0, "UTF-8");
  }

  /** True when no finding is {@link Severity#UNSAFE}: what {@code redislock doctor}'s exit status 0 means. */
  public boolean isSafe() {
    return safe;
  }

  public List<Finding> findings() {
    return findings;
  }

  /** The report as {@code redislock doctor} prints it. */
  public String text() {
    return text;
  }

  @Override
  public String toString() {
    return text;
  }
}
