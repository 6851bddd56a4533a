module github.com/streamrun/streamrun

go 1.26
