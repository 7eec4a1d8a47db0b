# frozen_string_literal: true

# A Sidekiq server middleware that runs one copy of a job at a time: while a
# job with the same class and arguments runs anywhere, another copy that a
# worker picks up is skipped (acknowledged without running). The lock lives
# only while the job runs, held by the process running it and renewed in
# the background, so a killed worker frees it within TTL seconds; it is
# released by its owner only, so a job that ran past a lost lock never
# releases the copy that took over.
#
# In an application (Sidekiq itself is not needed by this file):
#
#   Sidekiq.configure_server do |config|
#     config.server_middleware do |chain|
#       chain.add UniqueJobs, RedisLock::Client.new(ENV.fetch("REDIS_URL"))
#     end
#   end
#
# Run directly, it calls the middleware the way Sidekiq does, from threads,
# without Sidekiq, against the Redis at REDIS_URL (or the argument), and
# exits 1 when a copy ran twice at once or was not skipped:
#
#   ruby examples/ruby/sidekiq_unique_jobs.rb redis://127.0.0.1:6379/0
$LOAD_PATH.unshift(File.expand_path("../../bindings/ruby/lib", __dir__)) if $PROGRAM_NAME == __FILE__
require "json"
require "logger"
require "redislock"

# The middleware. `client`: a RedisLock::Client (one per process; threads
# share it). `ttl`: seconds a killed worker's lock outlives it.
class UniqueJobs
  def initialize(client, ttl: 60, logger: Logger.new($stderr))
    @client = client
    @ttl = ttl
    @logger = logger
  end

  # Sidekiq's server middleware interface: yield runs the job.
  def call(_worker, job, _queue)
    name = lock_name(job)
    lock = @client.try_acquire(name, ttl: @ttl, auto_renew: true)
    unless lock
      @logger.info("skipping #{job['class']} #{job['jid']}: a copy is running (#{name})")
      return
    end
    begin
      yield
    ensure
      @logger.warn("#{name} was lost while the job ran: another copy may have run") if lock.lost?
      lock.release_quietly # leaves a new owner's lock alone
    end
  end

  # JSON, not Array#inspect, whose output changes between Ruby versions
  # (Hash#inspect did in 3.4) and would let two versions run one job twice.
  def lock_name(job)
    "unique:#{job['class']}:#{JSON.generate(job['args'])}"
  end
end

if $PROGRAM_NAME == __FILE__
  url = ARGV[0] || ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0")
  middleware = UniqueJobs.new(RedisLock::Client.new(url), logger: Logger.new(nil))
  job = ->(args) { { "class" => "ReportJob", "jid" => rand(1 << 48).to_s(16), "args" => args } }
  ran = Queue.new
  skipped = Queue.new
  # Four "Sidekiq threads" pick up copies of ReportJob [42] at once, and one
  # picks up ReportJob [7]: two jobs run, three copies are skipped. The copy
  # of [42] that runs waits (10 s at most) until the others were skipped.
  threads = [[42], [42], [42], [42], [7]].map do |args|
    Thread.new do
      done = false
      middleware.call(nil, job.(args), "default") do
        deadline = Time.now + 10
        sleep 0.01 until args == [7] || skipped.size == 3 || Time.now > deadline
        ran << args
        done = true
      end
      skipped << args unless done
    end
  end
  threads.each(&:join)
  runs = Array.new(ran.size) { ran.pop }.sort
  skips = Array.new(skipped.size) { skipped.pop }
  again = false
  middleware.call(nil, job.([42]), "default") { again = true } # released: runs
  puts "ran: #{runs.inspect}, skipped: #{skips.inspect}, ran again afterwards: #{again}"
  exit(runs == [[7], [42]] && skips == [[42]] * 3 && again ? 0 : 1)
end
