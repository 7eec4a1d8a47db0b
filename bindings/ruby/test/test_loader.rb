# frozen_string_literal: true

require_relative "helper"
require "rbconfig"

# Where RedisLock::Native finds libredislock, and what it refuses: each case
# runs a child ruby over a copy of the gem's Ruby files laid out in a
# temporary directory (a checkout, or an installed gem), with libraries put
# (symlinked) where the loader looks.
class TestLoader < Minitest::Test
  include Helpers

  SRC = File.expand_path("../lib", __dir__)
  PROBE = 'require "redislock"; print RedisLock.library_path, " ", RedisLock.library_version'

  # The library this suite runs against ($REDISLOCK_LIB in make test-ruby).
  def lib
    RedisLock.library_path
  end

  def test_version_equals_the_loaded_library
    cargo = File.read(File.join(ROOT, "Cargo.toml"))[/^version = "(.*)"/, 1]
    assert_equal cargo, RedisLock::VERSION, "version.rb follows Cargo.toml"
    assert_equal RedisLock::VERSION, RedisLock.library_version
    env = ENV.fetch("REDISLOCK_LIB", "")
    assert_equal File.expand_path(env), RedisLock.library_path unless env.empty?
    mapped = File.readlines("/proc/self/maps").map { |l| l.split(" ", 6)[5].to_s.strip }
    assert_includes mapped, File.realpath(RedisLock.library_path), "library_path is the file mapped"
  end

  def test_a_truncated_library_is_refused_by_name
    Dir.mktmpdir("redislock-loader-") do |dir|
      # Cut inside the loaded segments (a debug build's second half is
      # debug info, which dlopen never reads), and inside the headers.
      [1_000_000, 1000].each do |size|
        bad = File.join(dir, "truncated-#{size}.so")
        File.binwrite(bad, File.binread(lib, size))
        out, err, status = probe(SRC, "REDISLOCK_LIB" => bad)
        refused(out, err, status, bad)
        assert_match(/#{Regexp.escape(bad)}: truncated/, err)
      end
    end
  end

  def test_a_library_of_another_architecture_is_refused_by_name
    Dir.mktmpdir("redislock-loader-") do |dir|
      bad = File.join(dir, "libredislock.so")
      FileUtils.cp(lib, bad)
      File.open(bad, "r+b") do |f|
        f.seek(18)
        f.write("\xB7\x00".b) # e_machine: EM_AARCH64
      end
      out, err, status = probe(SRC, "REDISLOCK_LIB" => bad)
      refused(out, err, status, bad)
      assert_match(/#{Regexp.escape(bad)}: built for aarch64 \(64-bit\), but this Ruby runs on x86_64/, err)
    end
  end

  def test_a_file_that_is_no_library_is_refused_by_name
    Dir.mktmpdir("redislock-loader-") do |dir|
      bad = File.join(dir, "libredislock.so")
      File.write(bad, "INPUT(libc.so.6)\n")
      out, err, status = probe(SRC, "REDISLOCK_LIB" => bad)
      refused(out, err, status, bad)
      assert_match(/#{Regexp.escape(bad)}: not an ELF file/, err)
    end
  end

  def test_redislock_lib_at_a_missing_file_is_the_only_place_tried
    Dir.mktmpdir("redislock-loader-") do |dir|
      src = checkout(dir, bundled: lib, debug: lib)
      missing = File.join(dir, "nowhere", "libredislock.so")
      out, err, status = probe(src, "REDISLOCK_LIB" => missing)
      refused(out, err, status, missing)
      assert_match(/#{Regexp.escape(missing)}: no such file/, err)
      refute_match(/bundled|build tree|libredislock\.so\.0/, err, "nothing but $REDISLOCK_LIB is tried")
    end
  end

  def test_the_bundled_library_comes_before_the_build_tree
    Dir.mktmpdir("redislock-loader-") do |dir|
      src = checkout(dir, bundled: lib, release: lib, debug: lib)
      assert_equal "#{bundled(src)} #{RedisLock::VERSION}", loads(src)

      # Without it, the build tree: a broken target/release is passed over.
      File.delete(bundled(src))
      release = File.join(dir, "target", "release", "libredislock.so")
      File.delete(release)
      File.binwrite(release, File.binread(lib, 4096))
      assert_equal "#{File.join(dir, 'target', 'debug', 'libredislock.so')} #{RedisLock::VERSION}", loads(src)

      # Nothing anywhere: the error names each place and why.
      File.delete(File.join(dir, "target", "debug", "libredislock.so"))
      out, err, status = probe(src, "LD_LIBRARY_PATH" => File.join(dir, "empty"))
      skip "a system libredislock.so.0 loaded: #{out}" if status.success?
      refused(out, err, status, bundled(src))
      assert_match(/bundled #{Regexp.escape(bundled(src))}: no such file/, err)
      assert_match(/build tree #{Regexp.escape(release)}: truncated/, err)
      assert_match(%r{build tree #{Regexp.escape(dir)}/target/debug/libredislock\.so: no such file}, err)
      assert_match(/system libredislock\.so\.0: failed to load: .*cannot open shared object file/, err)
    end
  end

  def test_an_installed_gem_has_no_build_tree
    Dir.mktmpdir("redislock-loader-") do |dir|
      src = installed(dir)
      # A target/ beside it is no build tree: no Cargo.toml above.
      %w[release debug].each { |p| link(lib, File.join(dir, "gems", "target", p, "libredislock.so")) }
      out, err, status = probe(src, "LD_LIBRARY_PATH" => File.join(dir, "empty"))
      if status.success?
        refute out.start_with?(dir), "the build tree of a gem that is not in a checkout was used: #{out}"
      else
        refused(out, err, status, bundled(src))
        refute_match(/build tree|target/, err)
        assert_match(/system libredislock\.so\.0/, err)
      end
    end
  end

  def test_the_system_library_is_found_by_the_dynamic_loader
    Dir.mktmpdir("redislock-loader-") do |dir|
      src = installed(dir)
      link(lib, File.join(dir, "sys", "libredislock.so.0"))
      # The path read back from /proc/self/maps: the symlink's target.
      assert_equal "#{File.realpath(lib)} #{RedisLock::VERSION}",
                   loads(src, "LD_LIBRARY_PATH" => File.join(dir, "sys"))
    end
  end

  def test_a_library_of_another_version_is_refused
    Dir.mktmpdir("redislock-loader-") do |dir|
      src = installed(dir, version: "9.9.9")
      link(lib, File.join(dir, "sys", "libredislock.so.0"))
      out, err, status = probe(src, "LD_LIBRARY_PATH" => File.join(dir, "sys"))
      refused(out, err, status, File.realpath(lib))
      assert_includes err, "#{File.realpath(lib)} is libredislock #{RedisLock::VERSION}, but this gem is 9.9.9"

      link(lib, bundled(src))
      out, err, status = probe(src)
      refused(out, err, status, bundled(src))
      assert_includes err, "#{bundled(src)} is libredislock #{RedisLock::VERSION}, but this gem is 9.9.9"
    end
  end

  private

  # Run PROBE in a child ruby over the lib directory `src`; no
  # $REDISLOCK_LIB unless given.
  def probe(src, env = {})
    Open3.capture3({ "REDISLOCK_LIB" => nil, "LD_LIBRARY_PATH" => nil }.merge(env),
                   RbConfig.ruby, "-w", "-I", src, "-e", PROBE, chdir: Dir.tmpdir)
  end

  # What PROBE printed, after checking that it loaded without a word on stderr.
  def loads(src, env = {})
    out, err, status = probe(src, env)
    assert status.success?, err
    assert_empty err
    out
  end

  # A LoadError naming `file`: an exception, not a crash.
  def refused(out, err, status, file)
    refute status.signaled?, "the child died of signal #{status.termsig}: #{err}"
    refute status.success?, "loaded: #{out}"
    assert_match(/LoadError/, err)
    assert_includes err, file
  end

  def bundled(src)
    File.join(src, "redislock", "libredislock.so")
  end

  # The gem's Ruby files in a checkout's layout under `dir`, with libraries
  # in its build tree; returns the lib directory.
  def checkout(dir, bundled: nil, release: nil, debug: nil)
    src = ruby_files(File.join(dir, "bindings", "ruby", "lib"))
    File.write(File.join(dir, "Cargo.toml"), "[package]\n")
    FileUtils.mkdir_p(File.join(dir, "include"))
    File.write(File.join(dir, "include", "redislock.h"), "")
    link(bundled, bundled(src)) if bundled
    link(release, File.join(dir, "target", "release", "libredislock.so")) if release
    link(debug, File.join(dir, "target", "debug", "libredislock.so")) if debug
    src
  end

  # The gem's Ruby files as `gem install` lays them out (no checkout
  # around), with `version` in version.rb when given; returns lib.
  def installed(dir, version: nil)
    src = ruby_files(File.join(dir, "gems", "gems", "redislock-#{RedisLock::VERSION}", "lib"))
    if version
      file = File.join(src, "redislock", "version.rb")
      File.write(file, File.read(file).sub(/VERSION = ".*"/, "VERSION = \"#{version}\""))
    end
    src
  end

  def ruby_files(dest)
    Dir.glob("**/*.rb", base: SRC).each do |rel|
      FileUtils.mkdir_p(File.dirname(File.join(dest, rel)))
      FileUtils.cp(File.join(SRC, rel), File.join(dest, rel))
    end
    dest
  end

  def link(target, path)
    FileUtils.mkdir_p(File.dirname(path))
    File.symlink(target, path)
  end
end
