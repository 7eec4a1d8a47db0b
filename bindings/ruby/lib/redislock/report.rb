# frozen_string_literal: true

module RedisLock
  # One thing Client#doctor checked on one server (frozen):
  #
  # - severity: :ok, :warning or :unsafe (:unknown for a severity newer
  #   than this gem);
  # - check: which check ("server", "eviction", "scripting", "time",
  #   "pubsub", "acl", "persistence", "replication", "clients", "cluster",
  #   "sentinel", "redlock", "latency", "lock-cycle", ...): stable names,
  #   to match on;
  # - server: "host:port" or a socket path (never credentials), or the
  #   deployment for checks of the whole;
  # - message: what was found, and why it matters for a lock;
  # - fix: what to change; "" when nothing needs to.
  Finding = Struct.new(:severity, :check, :server, :message, :fix, keyword_init: true) do
    def initialize(**)
      super
      freeze
    end
  end

  # What Client#doctor found: every check on every server the client's locks
  # may reach, and one lock cycle. The checks are the core's (the same as
  # `redislock doctor` and every binding's doctor); this only holds their
  # result. Frozen. #to_s is the text `redislock doctor` prints, ending with
  # a "verdict:" line, for the application's log:
  #
  #   report = client.doctor
  #   logger.warn(report.to_s) unless report.safe?
  class Report
    SEVERITIES = {
      Native::SEVERITY_OK => :ok,
      Native::SEVERITY_WARNING => :warning,
      Native::SEVERITY_UNSAFE => :unsafe
    }.freeze
    private_constant :SEVERITIES

    # The Findings (a frozen Array), in the order checked: each server's,
    # then the whole deployment's.
    attr_reader :findings

    # @api private: made by Client#doctor
    def initialize(findings, safe, text)
      @findings = findings.freeze
      @safe = safe
      @text = text
      freeze
    end

    # @api private: a copy of the native report at `ptr` (a
    # redislock_report*), which the caller still owns and frees.
    def self.from_native(ptr)
      count = Native.redislock_report_count(ptr)
      findings = Array.new(count) do |i|
        f = Native.redislock_report_finding(ptr, i)
        raise InternalError, "the report has no finding #{i} of #{count}" if f.null?

        f = Native::Finding.new(f)
        Finding.new(severity: SEVERITIES.fetch(f[:severity], :unknown), check: Native.utf8(f[:check]),
                    server: Native.utf8(f[:server]), message: Native.utf8(f[:message]), fix: Native.utf8(f[:fix]))
      end
      new(findings, Native.redislock_report_is_safe(ptr), Native.utf8(Native.redislock_report_text(ptr)))
    end

    # True when no finding is :unsafe (warnings allowed): what `redislock
    # doctor`'s exit status 0 means.
    def safe?
      @safe
    end

    # The report as `redislock doctor` prints it: one line per finding, each
    # fix on the next line, then a verdict line.
    def to_s
      @text
    end

    def inspect
      counts = @findings.map(&:severity).tally.map { |severity, n| "#{n} #{severity}" }
      "#<#{self.class.name} #{safe? ? 'safe' : 'UNSAFE'}: #{counts.join(', ')}>"
    end
  end
end
