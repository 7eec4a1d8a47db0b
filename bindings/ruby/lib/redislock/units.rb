# frozen_string_literal: true

require "uri"

module RedisLock
  # Arguments turned into what the C API takes, refused (InvalidArgument, an
  # ArgumentError) before any I/O when they make no sense.
  module Units
    MAX_TTL = 30 * 24 * 3600 # seconds: the library's limit (30 days)
    MAX_WAIT = 2**53 / 1000 # seconds: beyond this, say nil (forever)
    MAX_TIMEOUT = 3600 # seconds: the library's longest connect, command and node timeout

    module_function

    # Seconds of a lock's life to whole milliseconds, 1 ms to 30 days.
    def ttl_ms(ttl, what = "ttl")
      seconds = number(ttl, what)
      unless seconds >= 0.001 && seconds <= MAX_TTL
        raise InvalidArgument, "#{what} must be 0.001 to #{MAX_TTL} seconds (30 days), got #{ttl.inspect}"
      end

      (seconds * 1000).round
    end

    # A wait in seconds to the C API's milliseconds: nil waits forever (-1),
    # 0 tries once, more waits at most that long (at least 1 ms).
    def wait_ms(wait)
      return -1 if wait.nil?

      seconds = number(wait, "wait")
      if seconds.negative? || seconds > MAX_WAIT
        raise InvalidArgument,
              "wait must be nil (forever), 0 (try once) or up to #{MAX_WAIT} seconds, got #{wait.inspect}"
      end
      return 0 if seconds.zero?

      [(seconds * 1000).ceil, 1].max
    end

    # `url` with each of `timeouts` ({"connect_timeout" => seconds, ...}) as
    # a query parameter in whole milliseconds (rounded), added before any
    # #fragment. Each must be 0.001 to 3600 seconds (the library's range).
    # The option wins over the URL: every parameter of the URL that names
    # one of `timeouts` (its name read percent-decoded, as the library reads
    # it) is removed first, whatever it says; the rest of the URL (its other
    # parameters, user info and fragment) stays as it is.
    def with_timeouts(url, timeouts)
      head, hash, fragment = url.partition("#")
      base, _, query = head.partition("?")
      params = timeouts.map do |param, value|
        seconds = number(value, param)
        unless seconds >= 0.001 && seconds <= MAX_TIMEOUT
          raise InvalidArgument, "#{param} must be 0.001 to #{MAX_TIMEOUT} seconds (1 hour), got #{value.inspect}"
        end

        "#{param}=#{(seconds * 1000).round}ms"
      end
      kept = query.empty? ? [] : query.split("&", -1)
      kept = kept.reject { |pair| timeouts.key?(param_name(pair.partition("=")[0])) }
      query = kept.join("&")
      query += "&" unless query.empty? || query.end_with?("&")
      "#{base}?#{query}#{params.join('&')}#{hash}#{fragment}"
    end

    # A query parameter's name as the library reads it (percent-decoded; a
    # stray '%' as it stands).
    def param_name(raw)
      URI.decode_www_form_component(raw)
    rescue ArgumentError
      raw
    end

    # A name or token: a non-empty String (binary-safe) or Symbol.
    def bytes(value, what)
      str = value.is_a?(Symbol) ? value.to_s : value
      raise InvalidArgument, "#{what} must be a String, got #{value.inspect}" unless str.is_a?(String)
      raise InvalidArgument, "#{what} must not be empty" if str.empty?

      str
    end

    # A count (limit, permits) in 1..max.
    def count(value, what, max)
      unless value.is_a?(Integer) && value >= 1 && value <= max
        raise InvalidArgument, "#{what} must be an Integer from 1 to #{max}, got #{value.inspect}"
      end

      value
    end

    def number(value, what)
      unless value.is_a?(Numeric) && value.real? && (!value.is_a?(Float) || value.finite?)
        raise InvalidArgument, "#{what} must be a finite number of seconds, got #{value.inspect}"
      end

      value
    end
  end
end
