export { createHttpApp, type HttpApp, type HttpAppOptions } from './app.js'
