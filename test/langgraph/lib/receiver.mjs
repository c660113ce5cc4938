// A webhook receiver on 127.0.0.1: records every POST and answers with the
// status that `status` holds at the time (tests flip it to make deliveries fail).
import { createServer } from "node:http";

export async function startReceiver() {
  const r = {
    status: 200,
    deliveries: [], // { status answered, body (parsed JSON or text), at }
    url: "",
    close: () => new Promise((res) => server.close(() => res())),
  };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      let parsed = body;
      try {
        parsed = JSON.parse(body);
      } catch {}
      const status = r.status;
      r.deliveries.push({ method: req.method, path: req.url, status, body: parsed, at: Date.now() });
      res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "not now");
    });
  });
  await new Promise((res) => server.listen(0, "127.0.0.1", res));
  r.url = `http://127.0.0.1:${server.address().port}/hook`;
  r.accepted = () => r.deliveries.filter((d) => d.status < 300);
  return r;
}
