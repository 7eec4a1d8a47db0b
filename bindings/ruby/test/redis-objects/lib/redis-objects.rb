require 'redis/objects'
