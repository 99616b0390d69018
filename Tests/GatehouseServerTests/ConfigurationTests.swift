import GatehouseServer
import Logging
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    @Test("defaults serve SQLite from ./gatehouse-data on 127.0.0.1:8080")
    func defaults() throws {
        let config = try GatehouseConfiguration.resolve(flags: [:], environment: [:])
        #expect(config.host == "127.0.0.1")
        #expect(config.port == 8080)
        #expect(config.storeLocation == .sqlite(path: "./gatehouse-data/gatehouse.sqlite"))
        #expect(config.logLevel == .info)
        #expect(config.logFormat == .text)
        #expect(config.maxBodySize == 1_048_576)
        #expect(config.effectivePublicURL == "http://127.0.0.1:8080")
    }

    @Test("GATEHOUSE_* variables set every option")
    func environment() throws {
        let config = try GatehouseConfiguration.resolve(
            flags: [:],
            environment: [
                "GATEHOUSE_HOST": "0.0.0.0", "GATEHOUSE_PORT": "9000", "GATEHOUSE_DATA_DIR": "/var/lib/gh",
                "GATEHOUSE_DATABASE_URL": "postgres://u:p@db:5433/gh",
                "GATEHOUSE_PUBLIC_URL": "https://auth.example.com/",
                "GATEHOUSE_LOG_LEVEL": "DEBUG", "GATEHOUSE_LOG_FORMAT": "json", "GATEHOUSE_MAX_BODY_SIZE": "2048",
            ])
        #expect(config.host == "0.0.0.0")
        #expect(config.port == 9000)
        #expect(config.dataDirectory == "/var/lib/gh")
        #expect(config.storeLocation == .postgres(url: "postgres://u:p@db:5433/gh", searchPath: nil))
        #expect(config.effectivePublicURL == "https://auth.example.com")
        #expect(config.logLevel == .debug)
        #expect(config.logFormat == .json)
        #expect(config.maxBodySize == 2048)
    }

    @Test("a flag wins over its environment variable, which wins over the default")
    func precedence() throws {
        let config = try GatehouseConfiguration.resolve(
            flags: [.port: "7000", .logFormat: "text"],
            environment: ["GATEHOUSE_PORT": "9000", "GATEHOUSE_LOG_FORMAT": "json", "GATEHOUSE_HOST": "::1"])
        #expect(config.port == 7000)
        #expect(config.logFormat == .text)
        #expect(config.host == "::1")
        #expect(config.effectivePublicURL == "http://[::1]:7000")
    }

    @Test("empty values count as unset")
    func emptyValues() throws {
        let config = try GatehouseConfiguration.resolve(
            flags: [.host: ""], environment: ["GATEHOUSE_DATABASE_URL": "", "GATEHOUSE_PORT": ""])
        #expect(config.host == "127.0.0.1")
        #expect(config.port == 8080)
        #expect(config.databaseURL == nil)
    }

    @Test("sqlite:// URLs name another SQLite file")
    func sqliteURL() throws {
        let config = try GatehouseConfiguration.resolve(flags: [.databaseURL: "sqlite:///srv/gh.db"], environment: [:])
        #expect(config.storeLocation == .sqlite(path: "/srv/gh.db"))
    }

    @Test(
        "invalid settings are refused with a message naming the setting",
        arguments: [
            (Setting.port, "80a", "--port must be a port number"),
            (.port, "70000", "--port must be a port number"),
            (.logLevel, "loud", "--log-level must be one of"),
            (.logFormat, "xml", "--log-format must be text or json"),
            (.databaseURL, "mysql://x/y", "--database-url must start with postgres://"),
            (.publicURL, "ftp://x", "--public-url must be an http:// or https:// URL"),
            (.maxBodySize, "12", "--max-body-size must be a byte count"),
        ])
    func invalid(key: Setting, value: String, message: String) {
        #expect {
            try GatehouseConfiguration.resolve(flags: [key: value], environment: [:])
        } throws: { error in
            "\(error)".hasPrefix(message)
        }
    }

    @Test("an invalid variable is named by its environment name, and a password in a URL is never echoed")
    func invalidEnvironment() {
        #expect {
            try GatehouseConfiguration.resolve(
                flags: [:], environment: ["GATEHOUSE_DATABASE_URL": "redis://:hunter2@h"])
        } throws: { error in
            "\(error)".hasPrefix("GATEHOUSE_DATABASE_URL") && !"\(error)".contains("hunter2")
        }
    }

    @Test("store descriptions for logs carry no credentials")
    func storeDescription() {
        let location = StoreLocation.postgres(url: "postgres://admin:s3cret@db.internal:6543/gh", searchPath: nil)
        #expect(location.description == "postgres at db.internal:6543/gh")
    }
}
