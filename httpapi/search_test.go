package httpapi_test

import (
	"fmt"
	"sync"
	"testing"
)

// A thread the API just created is found by the next search, whatever
// the read model's lag.
func TestServer_searchAfterCreate(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	misses := 0
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				tag := fmt.Sprintf("w%d-%d", w, i)
				code, _ := e.do("POST", "/threads", `{"metadata":{"tag":"`+tag+`"}}`)
				if code != 200 {
					t.Error(code)
					return
				}
				code, b := e.do("POST", "/threads/search", `{"metadata":{"tag":"`+tag+`"}}`)
				if code != 200 || len(b) < 10 {
					mu.Lock()
					misses++
					mu.Unlock()
					t.Logf("miss %s: %d %s", tag, code, b)
				}
			}
		}()
	}
	wg.Wait()
	if misses > 0 {
		t.Fatalf("%d misses", misses)
	}
}
