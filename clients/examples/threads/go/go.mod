module crashsweep.dev/clients/examples/threads/go

go 1.19
