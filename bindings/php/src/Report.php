<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * What Client::doctor() found: every check on every server the client's
 * locks may reach, and one lock cycle. The checks are the core's (the
 * same as `redislock doctor` and every binding's doctor); this only holds
 * their result. Read-only; (string)$report is the text `redislock doctor`
 * prints, ending with a `verdict:` line, for the application's log.
 *
 *   $report = $client->doctor();
 *   if (!$report->isSafe()) {
 *       error_log((string)$report);
 *   }
 */
final class Report implements \Stringable
{
    /** The C API's severities (enum redislock_severity), as strings. */
    private const SEVERITIES = [0 => 'ok', 1 => 'warning', 2 => 'unsafe'];

    /**
     * @internal made by Client::doctor()
     * @param list<Finding> $findings
     */
    public function __construct(
        /** @var list<Finding> in the order checked: each server's, then the whole deployment's */
        public readonly array $findings,
        private readonly bool $safe,
        private readonly string $text,
    ) {
    }

    /**
     * A copy of the native report $report (a redislock_report*), which the
     * caller still owns and frees.
     *
     * @internal
     */
    public static function fromNative(\FFI $ffi, \FFI\CData $report): self
    {
        $findings = [];
        $n = $ffi->redislock_report_count($report);
        for ($i = 0; $i < $n; $i++) {
            $f = $ffi->redislock_report_finding($report, $i);
            if ($f === null) {
                throw new LockException("redislock: the report has no finding $i of $n");
            }
            $severity = (int)$f->severity;
            $findings[] = new Finding(
                // A severity newer than this package: not 'ok', so never hidden.
                self::SEVERITIES[$severity] ?? 'unknown',
                self::string($f->check),
                self::string($f->server),
                self::string($f->message),
                self::string($f->fix),
            );
        }
        return new self(
            $findings,
            $ffi->redislock_report_is_safe($report),
            self::string($ffi->redislock_report_text($report)),
        );
    }

    private static function string(\FFI\CData|string|null $s): string
    {
        return match (true) {
            $s === null => '',
            is_string($s) => $s,
            default => \FFI::string($s),
        };
    }

    /** True when no finding is 'unsafe' (warnings allowed): what `redislock doctor`'s exit status 0 means. */
    public function isSafe(): bool
    {
        return $this->safe;
    }

    /** The report as `redislock doctor` prints it: one line per finding, each fix on the next, then a verdict line. */
    public function __toString(): string
    {
        return $this->text;
    }
}
