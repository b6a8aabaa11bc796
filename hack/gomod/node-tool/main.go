// node-tool: the one program of the real node's own images (docs/control-plane.md, "The real
// node"). No image can be pulled here, so the harness imports these instead:
//
//	node-tool pause   the pod sandbox: waits for SIGTERM or SIGINT, then exits 0.
//	node-tool app     a test application: prints what it was given, then serves until stopped.
//
// The app prints one line per value, to stdout (the kubelet's pod log file), so a test reads
// what a real container saw:
//
//	env NAME=value             each variable named in APP_PRINT_ENV (comma separated), at start
//	file PATH=content          each file named by APP_PRINT_FILES, or by --config.file, at start
//	                           and again after every reload
//	reload N                   the Nth call of its reload endpoint (POST /-/reload)
//
// It listens on --web.listen-address (default :9090), and accepts --web.enable-lifecycle, so
// it stands in for Prometheus in docs/sidecar-example.yaml unchanged.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: node-tool pause | app [--config.file=PATH] [--web.listen-address=ADDR]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "app":
		app(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "node-tool: unknown mode %q (pause, app)\n", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

func app(args []string) {
	listen := ":9090"
	var files []string
	for _, name := range split(os.Getenv("APP_PRINT_FILES")) {
		files = append(files, name)
	}
	for _, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--config.file="):
			files = append(files, strings.TrimPrefix(arg, "--config.file="))
		case strings.HasPrefix(arg, "--web.listen-address="):
			listen = strings.TrimPrefix(arg, "--web.listen-address=")
		case arg == "--web.enable-lifecycle":
		default:
			fmt.Fprintf(os.Stderr, "node-tool app: unknown argument %q\n", arg)
			os.Exit(2)
		}
	}
	var out sync.Mutex
	printFiles := func() {
		for _, name := range files {
			content, err := os.ReadFile(name)
			if err != nil {
				fmt.Printf("file %s error %v\n", name, err)
				continue
			}
			fmt.Printf("file %s=%s\n", name, strings.ReplaceAll(string(content), "\n", "\\n"))
		}
	}
	for _, name := range split(os.Getenv("APP_PRINT_ENV")) {
		fmt.Printf("env %s=%s\n", name, os.Getenv(name))
	}
	printFiles()

	reloads := 0
	http.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			http.Error(w, "POST or PUT", http.StatusMethodNotAllowed)
			return
		}
		out.Lock()
		reloads++
		fmt.Printf("reload %d\n", reloads)
		printFiles()
		out.Unlock()
	})
	http.HandleFunc("/-/ready", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}()
	if err := http.ListenAndServe(listen, nil); err != nil {
		fmt.Fprintf(os.Stderr, "node-tool app: %v\n", err)
		os.Exit(1)
	}
}

func split(list string) []string {
	var names []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names
}
