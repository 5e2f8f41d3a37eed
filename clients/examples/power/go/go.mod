module crashsweep.dev/clients/examples/power/go

go 1.19
