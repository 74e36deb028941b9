// Runs the store contract on the backend chosen by the environment: real Postgres when
// TEST_DATABASE_URL is set, the embedded PGlite (through its socket server) otherwise.
import t from 'tap'
import { testDatabase } from '../support/db.js'
import { storeContract } from './store-contract.js'

storeContract(t, testDatabase)
