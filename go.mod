module hybrid

go 1.26.8

require github.com/jedib0t/go-pretty/v6 v6.8.3 // indirect
