package backendtest

import "golang.org/x/sys/windows"

// wine: Wine's ntdll exports wine_get_version, Windows' does not.
var wine = windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
