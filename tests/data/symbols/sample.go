package server

import "net/http"

const (
	DefaultPort = 8080
	maxConns    = 100
)

// Server serves.
type Server struct {
	addr string
}

type Handler interface {
	Serve(w http.ResponseWriter) error
}

type ID int

type Alias = Server

func New(addr string) *Server {
	return &Server{addr: addr}
}

func (s *Server) Run() error {
	go func() {}()
	return nil
}

func (Box[T]) Get() T {
	var zero T
	return zero
}
