module github.com/idem-dev/idem

go 1.26.8
