module kmodd.local/helmrender

go 1.22
