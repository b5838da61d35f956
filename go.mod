module hybrid

go 1.26.8
