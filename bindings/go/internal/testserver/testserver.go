// Package testserver starts the throwaway redis-server of the Go tests
// (this module's and its redsync package's): a free loopback port (never
// 6379), a temporary directory, stopped when the test ends. It is for the
// tests only (internal: nothing outside the module imports it).
package testserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a throwaway redis-server on a free loopback port (never
// 6379), in a temporary directory, as every suite of the project starts
// one: $REDIS_SERVER chooses the binary (a name on the PATH or a path, a
// relative one taken from the repository root), redis-server by default.
type Server struct {
	Cmd    *exec.Cmd
	Port   int
	Dir    string
	Exited chan struct{}
}

// Kill stops the server (again: nothing).
func (s *Server) Kill() {
	s.Cmd.Process.Kill()
	<-s.Exited
}

// Bin is $REDIS_SERVER's binary (redis-server by default).
func Bin(t testing.TB) string {
	name := os.Getenv("REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		_, here, _, _ := runtime.Caller(0) // bindings/go/internal/testserver/
		name = filepath.Join(filepath.Dir(here), "..", "..", "..", "..", name)
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: apt-get install redis-server (make deps does), or set REDIS_SERVER", name)
	}
	return path
}

// FreePort is a free loopback port, never 6379.
func FreePort(t testing.TB) int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port
		}
	}
}

// Start starts a server, stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin(t)
	dir := t.TempDir()
	for attempt := 0; attempt < 20; attempt++ {
		s := &Server{Port: FreePort(t), Dir: dir}
		s.Cmd = exec.Command(bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", "redis.log", "--daemonize", "no")
		if err := s.Cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		s.Exited = exited
		go func() { s.Cmd.Wait(); close(exited) }()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{} // the port was taken: another one
				continue
			default:
			}
			if r, err := s.Do("PING"); err == nil && r == "PONG" {
				t.Cleanup(s.Kill)
				return s
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.Cmd.Process.Kill()
		<-exited
	}
	t.Fatal("could not start redis-server on a free port")
	return nil
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Do sends one command over a connection of its own and returns its reply:
// a string for simple and bulk strings ("<nil>" for a nil), the number for an
// integer, the error for an error reply.
func (s *Server) Do(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "<nil>", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// Must is Do, failing the test on an error.
func (s *Server) Must(t testing.TB, args ...string) string {
	t.Helper()
	r, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}
