module crashsweep.dev/clients/go

go 1.19
