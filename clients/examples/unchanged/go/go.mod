module crashsweep.dev/clients/examples/unchanged/go

go 1.19
