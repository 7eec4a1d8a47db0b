class Redis
  module Objects
    VERSION = "1.7.0"
  end
end
