package owner_test

import (
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

func memstoreConfig(c *eventstest.Clock) memstore.Config { return memstore.Config{Now: c.Now} }

func postMsg(id string) *eventspb.MessagePosted {
	return &eventspb.MessagePosted{MessageId: id, Author: "test", Text: id}
}
