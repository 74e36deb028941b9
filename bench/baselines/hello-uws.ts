// Baseline: the HTTP ceiling of this machine — a bare uWS server answering a constant.
import uWS from 'uWebSockets.js'

const port = Number(process.argv[2] ?? 0)
uWS.App().any('/*', res => { res.end('hello') }).listen('127.0.0.1', port, sock => {
  if (!sock) process.exit(1)
  process.stdout.write(`listening ${uWS.us_socket_local_port(sock)}\n`)
})
