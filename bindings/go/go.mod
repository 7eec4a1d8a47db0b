module github.com/redislock/redislock/bindings/go

go 1.21
