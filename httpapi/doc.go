// Package httpapi serves the LangGraph Agent Server API over HTTP and SSE
// (DESIGN §11), so that LangGraph's SDKs (@langchain/langgraph-sdk,
// langgraph_sdk) and UIs drive artifactr: assistants are configured agents,
// threads are artifactr threads, a run is a posted message and the
// artifactr run that takes it, and SSE event ids are stream sequences.
//
// Every handler writes through package client (posts, forks, cancels and
// the thread events a client may write: thread_metadata, thread_deleted)
// and reads the log or the thread-summaries read model; none talks to the
// stream any other way. README.md lists the routes, the mapping and what is
// left out.
//
// # Usage
//
//	c, err := client.Dial(ctx, client.Config{URL: natsURL})
//	if err != nil {
//		return err
//	}
//	api, err := httpapi.New(httpapi.Config{Client: c,
//		Assistants: []httpapi.Assistant{{GraphID: "echo", Kind: "echo"}}})
//	if err != nil {
//		return err
//	}
//	l, err := httpapi.Listen(api, httpapi.DefaultAddr, "", "")
//	if err != nil {
//		return err
//	}
//	defer l.Close(ctx)
//	go api.RunWebhooks(ctx, store) // a read-model store whose role may ack
//
// `artifactr serve --http ADDR [--config FILE] [--auth]` does this.
package httpapi
