# frozen_string_literal: true

# redis-objects' own specs (vendored under redis-objects/, see its ORIGIN.md)
# run with Debian's bacon, twice: with redis-objects' own Redis::Lock (every
# spec must pass: the harness works) and with redislock's switch loaded the
# way docs/ruby.md says (after redis-objects). With the switch, every spec
# must pass but the deliberate differences below, which docs/ruby.md lists;
# an unexpected failure, or a listed difference that passes, fails the run.
#
#   ruby bindings/ruby/test/redis_objects_specs.rb      (REDISLOCK_LIB, REDIS_SERVER as for the tests)

require "fileutils"
require "open3"
require "rbconfig"
require "socket"
require "tmpdir"

HERE = __dir__
VENDORED = File.join(HERE, "redis-objects")
REDISLOCK_LIB_DIR = File.expand_path("../lib", HERE)
SPECS = %w[redis_objects_instance_spec.rb redis_objects_model_spec.rb redis_autoload_objects_spec.rb].freeze

# Specs that fail with the switch on purpose, with the reason docs/ruby.md gives.
DIFFERENCES = {
  "should set value to 1 when no expiration is set" =>
    "without :expiration the lock gets a 60 s lease renewed while the block runs, not a 1 s TTL",
  "should deal with old lock format" =>
    "a value left by redis-objects before 1.4.2 (an expiry timestamp) is another owner's lock, not read as a time"
}.freeze

# Specs with a timing window of their own: a lock of 0.1 s checked to
# exist right after it was taken (a pause of the machine longer than that
# fails them, whichever Redis::Lock runs). A file whose only unexpected
# failures are these is run again, up to TIMING_TRIES times in all: a pause
# does not come back each time, a fault does.
TIMING = [
  "Redis should remove the key if lock is held past expiration",
  "should not manually delete a key with a 'lock' name if finished after expiration"
].freeze
TIMING_TRIES = 3

def bacon
  path = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "bacon") }.find { |f| File.executable?(f) }
  path or abort "redis-objects specs: no bacon on the PATH (Debian: apt-get install ruby-bacon)"
end

def free_port
  loop do
    s = TCPServer.new("127.0.0.1", 0)
    port = s.addr[1]
    s.close
    return port unless port == 6379
  end
end

# One spec file in a fresh copy: { passed:, failed: [names], summary: }.
def run(spec, switch)
  Dir.mktmpdir("redis-objects-specs-") do |dir|
    FileUtils.cp_r(Dir.glob(File.join(VENDORED, "*")), dir)
    # TRAVIS: redis-objects' own switch off for its two cross-thread checks
    # that race the thread start ("Avoid phantom remote test failures").
    env = { "REDIS_HOST" => "127.0.0.1", "REDIS_PORT" => free_port.to_s, "TRAVIS" => "1" }
    args = [RbConfig.ruby, "-I", File.join(dir, "lib"), "-I", REDISLOCK_LIB_DIR]
    args += ["-r", "redis/objects", "-r", "redislock/redis_objects"] if switch
    out, status = Open3.capture2e(env, *args, bacon, File.join("spec", spec), chdir: dir)
    failed = out.scan(/^\s*- (.+?) \[(?:FAILED|ERROR[^\]]*|MISSING)\]$/).flatten
    summary = out.scan(/^(\d+) specifications \((\d+) requirements\), (\d+) failures, (\d+) errors$/).last
    if summary.nil? || summary[0].to_i.zero?
      warn out
      abort "redis-objects specs: #{spec} ran no spec (#{status})"
    end
    specs = summary[0].to_i
    if failed.size != summary[2].to_i + summary[3].to_i
      warn out
      abort "redis-objects specs: #{spec}: #{failed.size} failing specs named, bacon counted #{summary[2]} + #{summary[3]}"
    end
    { passed: specs - failed.size, failed: failed, out: out }
  end
end

totals = { passed: 0, failed: 0 }
problems = []
outputs = [] # bacon's output of the files with an unexpected failure
[false, true].each do |switch|
  label = switch ? "with redislock's Redis::Lock" : "with redis-objects' own Redis::Lock"
  failed_here = []
  expected = switch ? DIFFERENCES.keys : []
  SPECS.each do |spec|
    r = nil
    TIMING_TRIES.times do |attempt|
      r = run(spec, switch)
      unexpected = r[:failed] - expected
      break if unexpected.empty? || !(unexpected - TIMING).empty? || attempt == TIMING_TRIES - 1

      puts "redis-objects #{spec} #{label}: only specs with a timing window of their own failed " \
           "(#{unexpected.join('; ')}); again (#{attempt + 2} of #{TIMING_TRIES})"
    end
    puts "redis-objects #{spec} #{label}: #{r[:passed]} passed, #{r[:failed].size} failed"
    totals[:passed] += r[:passed]
    totals[:failed] += r[:failed].size
    failed_here.concat(r[:failed])
    outputs << r[:out] unless (r[:failed] - expected).empty?
  end
  (failed_here - expected).each { |name| problems << "#{label}: unexpected failure: #{name}" }
  (expected - failed_here).each { |name| problems << "#{label}: listed as a difference but passed: #{name}" }
  (failed_here & expected).each { |name| puts "  deliberate difference: #{name}: #{DIFFERENCES[name]}" }
end
puts "redis-objects specs: #{totals[:passed]} passed, #{totals[:failed]} failed " \
     "(#{DIFFERENCES.size} deliberate differences of the switch, listed in docs/ruby.md)"
unless problems.empty?
  outputs.each { |out| warn out }
  problems.each { |p| warn "redis-objects specs: #{p}" }
  exit 1
end
