// The real node's own images (hack/build node): the pod sandbox's pause program and the test app.
module reloader.dev/hack/node-tool

go 1.26.0
