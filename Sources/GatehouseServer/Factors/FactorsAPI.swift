import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1/factors…` in GoTrue's wire format (account sessions of permanent users), and the admin API's factor
// endpoints (service key).

extension API {
    func enrollFactor(_ input: Operations.EnrollFactor.Input) async throws -> Operations.EnrollFactor.Output {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await factors.enroll(body, by: caller))))
        }
    }

    func challengeFactor(_ input: Operations.ChallengeFactor.Input) async throws -> Operations.ChallengeFactor.Output {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.challenge(input.path.factorId, by: caller))))
    }

    func verifyFactor(_ input: Operations.VerifyFactor.Input) async throws -> Operations.VerifyFactor.Output {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body):
            return .ok(.init(body: .json(try await factors.verify(input.path.factorId, body, by: caller))))
        }
    }

    func unenrollFactor(_ input: Operations.UnenrollFactor.Input) async throws -> Operations.UnenrollFactor.Output {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.unenroll(input.path.factorId, by: caller))))
    }

    func recoveryCodesStatus(_ input: Operations.RecoveryCodesStatus.Input) async throws
        -> Operations.RecoveryCodesStatus.Output
    {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.recoveryStatus(by: caller))))
    }

    func generateRecoveryCodes(_ input: Operations.GenerateRecoveryCodes.Input) async throws
        -> Operations.GenerateRecoveryCodes.Output
    {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.generateRecoveryCodes(by: caller))))
    }

    func regenerateRecoveryCodes(_ input: Operations.RegenerateRecoveryCodes.Input) async throws
        -> Operations.RegenerateRecoveryCodes.Output
    {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.regenerateRecoveryCodes(by: caller))))
    }

    func deleteRecoveryCodes(_ input: Operations.DeleteRecoveryCodes.Input) async throws
        -> Operations.DeleteRecoveryCodes.Output
    {
        let caller = try await access.permanentAccount()
        return .ok(.init(body: .json(try await factors.deleteRecoveryCodes(by: caller))))
    }

    func verifyRecoveryCode(_ input: Operations.VerifyRecoveryCode.Input) async throws
        -> Operations.VerifyRecoveryCode.Output
    {
        let caller = try await access.permanentAccount()
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await factors.verifyRecoveryCode(body, by: caller))))
        }
    }

    func adminListFactors(_ input: Operations.AdminListFactors.Input) async throws
        -> Operations.AdminListFactors.Output
    {
        _ = try await access.admin()
        let account = try await admin.user(input.path.userId)
        return .ok(.init(body: .json(try await factors.factors(accountID: account.id))))
    }

    func adminDeleteFactor(_ input: Operations.AdminDeleteFactor.Input) async throws
        -> Operations.AdminDeleteFactor.Output
    {
        let caller = try await access.admin()
        let account = try await admin.user(input.path.userId)
        let factor = try await factors.adminDelete(
            accountID: account.id, rawFactorID: input.path.factorId,
            event: caller.event(.factorDeleted, accountID: account.id))
        return .ok(.init(body: .json(factor)))
    }
}
