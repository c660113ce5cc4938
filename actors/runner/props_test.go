package runner

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The thread actors share one Props. Asked for an actor outside a spawn (a
// restart, which the supervisor never orders), it produces one that stops
// at once rather than a stale or nil one. Every runner test spawns through
// it, and the panic test spawns a thread's actor twice.
func TestThreadProps_sharedAndStopOutsideSpawn(t *testing.T) {
	quit := make(chan struct{})
	defer close(quit)
	sys := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10 * time.Millisecond))
	defer sys.Shutdown()
	ra := &runnerActor{r: &Runner{disp: newPool(quit, nil)}}
	props := ra.threadProps()
	if props != ra.threadProps() {
		t.Fatal("threadProps made a second Props")
	}
	stopped := make(chan struct{})
	var once sync.Once
	watcher := actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			once.Do(func() { c.Watch(c.Spawn(props)) })
		case *actor.Terminated:
			close(stopped)
		}
	})
	sys.Root.Spawn(watcher)
	waitClosed(t, stopped, "an actor produced outside a spawn did not stop")
}
